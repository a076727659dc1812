//! A peer's lock measured beside dlock and its floor in the same run, where the
//! backend's server has a lock of its own that the best clients use: PostgreSQL's
//! advisory locks (`pg_advisory_lock` hands off inside the server's lock manager,
//! with no TTL and no fencing token). Issue #34.2 sets dlock's PostgreSQL targets
//! against it, so `dlock bench` measures it interleaved with dlock's rounds rather than
//! in a separate harness on another minute's machine load.
//!
//! The peer is a [`FloorWaiter`]: the hand-off and contended scenarios run it the way
//! they run the floor's blocking lock, and the uncontended one cycles one of them.

use dlock_any::LockError;
use tokio::time::Instant;

use crate::floor_wait::FloorWaiter;
use crate::stats::Samples;

/// What the peer is, for the report, if the URL's backend has one in this build.
#[must_use]
pub fn describe(url: &str) -> Option<&'static str> {
    let (scheme, _) = crate::url_parts::scheme_and_base(url);
    match scheme.as_str() {
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Some(
            "pg_advisory_lock / pg_advisory_unlock, one connection per client (no TTL, no fencing token)",
        ),
        _ => None,
    }
}

/// A new client of the peer's lock on `name`, if the URL's backend has a peer.
///
/// # Cancel safety
/// Dropping it drops the connection being opened.
pub async fn waiter(url: &str, name: &str) -> Option<Result<Box<dyn FloorWaiter>, String>> {
    let (scheme, plain) = crate::url_parts::scheme_and_base(url);
    match scheme.as_str() {
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Some(advisory::connect(plain, name).await),
        _ => {
            // (read by the arms this build has)
            let _ = (plain, name);
            None
        }
    }
}

/// A "vs peer" row: dlock's figure beside the peer's (`pick` of its samples, in the
/// floor column), when the backend has a peer and its samples are there.
pub(crate) fn versus(
    measured: bool,
    scenario: &'static str,
    metric: &'static str,
    dlock: f64,
    theirs: &Samples,
    pick: &dyn Fn(&Samples) -> f64,
) -> Option<crate::Figure> {
    (measured && !theirs.is_empty()).then(|| crate::Figure {
        scenario,
        metric,
        dlock,
        floor: Some(pick(theirs)),
    })
}

/// The uncontended scenario on the peer: one client takes and releases a free lock
/// `cycles` times (plus a tenth to warm up, not kept). `None` if there is no peer.
///
/// # Errors
/// Connecting, or a statement that fails.
///
/// # Cancel safety
/// Dropping it closes its connection, which releases what it held.
pub(crate) async fn uncontended(url: &str, cycles: usize) -> Result<Option<Samples>, LockError> {
    let name = format!("{:016x}", dlock_any::random_u64());
    let Some(client) = waiter(url, &name).await else {
        return Ok(None);
    };
    let client = client.map_err(peer_error)?;
    let mut samples = Samples::default();
    for i in 0..cycles + cycles / 10 {
        let t = Instant::now();
        client.lock().await.map_err(peer_error)?;
        client.unlock().await.map_err(peer_error)?;
        if i >= cycles / 10 {
            samples.push(t.elapsed());
        }
    }
    Ok(Some(samples))
}

fn peer_error(e: String) -> LockError {
    LockError::Backend {
        message: format!("peer: {e}"),
        source: None,
    }
}

#[cfg(feature = "postgres")]
mod advisory {
    use dlock_any::async_trait;
    use sqlx::Connection;
    use sqlx::postgres::PgConnection;
    use tokio::sync::Mutex;

    use super::FloorWaiter;

    /// `pg_advisory_lock` blocks in the server until the lock is this session's; the
    /// holder's `pg_advisory_unlock` grants it to the next session inside the server.
    /// One connection of its own (no pool between), as each of dlock's clients has.
    pub struct AdvisoryWaiter {
        conn: Mutex<PgConnection>,
        name: String,
    }

    pub async fn connect(url: &str, name: &str) -> Result<Box<dyn FloorWaiter>, String> {
        let conn = PgConnection::connect(url)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Box::new(AdvisoryWaiter {
            conn: Mutex::new(conn),
            name: format!("dlock-bench-peer-{name}"),
        }))
    }

    #[async_trait]
    impl FloorWaiter for AdvisoryWaiter {
        async fn lock(&self) -> Result<(), String> {
            let mut conn = self.conn.lock().await;
            sqlx::query("SELECT pg_advisory_lock(hashtextextended($1, 0))")
                .bind(&self.name)
                .execute(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
        async fn unlock(&self) -> Result<(), String> {
            let mut conn = self.conn.lock().await;
            let (released,): (bool,) =
                sqlx::query_as("SELECT pg_advisory_unlock(hashtextextended($1, 0))")
                    .bind(&self.name)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(|e| e.to_string())?;
            if released {
                Ok(())
            } else {
                Err(format!("advisory lock {} was not held", self.name))
            }
        }
    }
}
