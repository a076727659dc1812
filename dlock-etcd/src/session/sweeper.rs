//! Deletes the keys of locks that went a TTL without renewal while their shared lease
//! lived on for other locks: what gives each lock its own expiry (see `shared`).

use std::sync::Weak;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use tokio::time::Instant;

use crate::session::bookkeeping::{Expired, SharedLeases};

/// Deletes per txn. etcd accepts 128 operations per txn by default, and counts a
/// nested txn's operations against what its parent leaves: 42 guarded deletes (each a
/// nested txn of one compare and one delete) keep well inside that.
const DELETES_PER_TXN: usize = 42;
/// The longest the sweeper sleeps before looking again.
const MAX_NAP: Duration = Duration::from_secs(1);
/// A failed delete is tried again after this long.
const RETRY: Duration = Duration::from_millis(200);

/// Runs until the client's last clone is dropped.
pub(crate) fn start(leases: Weak<SharedLeases>, client: Client, timeout: Duration) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(run(leases, client, timeout));
    }
}

async fn run(leases: Weak<SharedLeases>, client: Client, timeout: Duration) {
    loop {
        let Some(l) = leases.upgrade() else {
            return;
        };
        let now = Instant::now();
        let (due, next) = l.expired(now);
        for chunk in due.chunks(DELETES_PER_TXN) {
            if delete(&client, chunk, timeout).await {
                for e in chunk {
                    l.swept(e);
                }
            } else {
                for e in chunk {
                    l.sweep_failed(e, Instant::now() + RETRY);
                }
            }
        }
        let wake = next.map_or(now + MAX_NAP, |n| n.min(now + MAX_NAP));
        let notified = l.sweep.notified();
        l.sweeper_plans(wake);
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = notified => {}
        }
    }
}

/// Deletes the keys in one txn. Each key carries its acquisition's owner id, which
/// nobody else writes, so a delete only ever removes that acquisition's key — and only
/// while the key is still on the lease it was swept from: a key moved to a lease of its
/// own meanwhile (a lingering release, a hand-over) is no longer this client's to
/// delete, whatever a key list read before the move said.
async fn delete(client: &Client, keys: &[Expired], timeout: Duration) -> bool {
    let ops: Vec<TxnOp> = keys
        .iter()
        .map(|e| {
            TxnOp::txn(
                Txn::new()
                    .when([Compare::lease(e.key.clone(), CompareOp::Equal, e.lease)])
                    .and_then([TxnOp::delete(e.key.clone(), None)]),
            )
        })
        .collect();
    let mut c = client.clone();
    match tokio::time::timeout(timeout, c.txn(Txn::new().and_then(ops))).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "deleting expired lock keys failed; retrying");
            false
        }
        Err(_) => false,
    }
}

/// Against the test server (`DLOCK_TEST_ETCD_ENDPOINTS`); the quick tier builds no etcd.
#[cfg(test)]
mod etcd_server_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A key moved to another lease after it was noted for sweeping (a lingering
    /// release, a hand-over, seen by a key-list read sent before the move) is not
    /// deleted from there; on the lease it was noted on, it is.
    #[tokio::test]
    async fn a_sweep_deletes_a_key_only_on_the_lease_it_was_noted_on() {
        let endpoints = dlock_conformance::required_env("DLOCK_TEST_ETCD_ENDPOINTS");
        let eps: Vec<&str> = endpoints.split(',').collect();
        let mut c = Client::connect(eps, None).await.unwrap();
        let shared = c.lease_grant(30, None).await.unwrap().id();
        let own = c.lease_grant(30, None).await.unwrap().id();
        let key = format!("dlock-test/sweeper/{:016x}", dlock_core::random_u64());
        let put = |lease| etcd_client::PutOptions::new().with_lease(lease);
        c.put(key.as_str(), "", Some(put(shared))).await.unwrap();
        c.put(key.as_str(), "", Some(put(own))).await.unwrap(); // moved
        let timeout = Duration::from_secs(3);
        let noted = |lease| Expired {
            lease,
            key: key.clone(),
        };
        assert!(delete(&c, &[noted(shared)], timeout).await);
        let kept = c.get(key.as_str(), None).await.unwrap();
        assert_eq!(kept.kvs().len(), 1, "the moved key was deleted");
        assert!(delete(&c, &[noted(own)], timeout).await);
        let gone = c.get(key.as_str(), None).await.unwrap();
        assert!(
            gone.kvs().is_empty(),
            "a key on the lease it was noted on is deleted"
        );
        let _ = c.lease_revoke(shared).await;
        let _ = c.lease_revoke(own).await;
    }
}
