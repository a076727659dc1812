//! Renewals sent together: every renewal that reaches a node while the previous batch
//! is being taken off the queue goes out in one script call. Guards renew on a shared
//! grid (see `dlock_core::LockGuard`), so the renewals of all locks with one TTL come
//! due at the same instant and cost one round trip per tick, not one per lock.

use std::sync::Arc;
use std::time::Duration;

use crate::conn::Conn;
use dlock_core::backend::{Batcher, within};

use crate::errors::from_redis;
use crate::scripts;

/// Keys per script call: a call blocks the server while it runs, so a huge batch is cut
/// into calls of this size, pipelined on the one connection.
const MAX_BATCH: usize = 256;

/// One renewal: `key` to `ttl_ms` if `owner` still holds it (the answer is `false` if
/// not).
pub(crate) struct Renewal {
    pub key: Arc<str>,
    pub owner: Arc<str>,
    pub ttl_ms: u64,
}

/// The renewal queue of one node.
pub(crate) type Renewals = Batcher<Renewal, bool>;

/// Starts the renewal queue of the node behind `conn`.
pub(crate) fn start(conn: Conn, timeout: Duration, shown: String) -> Renewals {
    Batcher::start("renew", MAX_BATCH, move |batch: Vec<Renewal>| {
        let (mut conn, what) = (conn.clone(), format!("renew on {shown}"));
        async move {
            let mut call = scripts::RENEW_MANY.prepare_invoke();
            for r in &batch {
                call.key(&*r.key).arg(&*r.owner).arg(r.ttl_ms);
            }
            let renewed: Vec<i64> = within(timeout, &what, async {
                call.invoke_async(&mut conn)
                    .await
                    .map_err(|e| from_redis(&what, e))
            })
            .await?;
            Ok(renewed.into_iter().map(|n| Ok(n == 1)).collect())
        }
    })
}
