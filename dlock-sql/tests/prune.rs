//! `SqlLock::prune`: rows of names unheld for longer than `idle` are deleted, held ones
//! stay, and a pruned name taken again gets a token above every token it had.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_conformance::take;
use dlock_core::{DistributedLock, DistributedSemaphore, LockError, LockName, random_u64};
use dlock_sql::SqlLock;

const LONG: Duration = Duration::from_secs(60);
const IDLE: Duration = Duration::from_secs(1);

fn name(case: &str) -> LockName {
    LockName::new(&format!("prune/{case}/{:016x}", random_u64())).unwrap()
}

async fn prune_deletes_idle_rows_and_keeps_tokens_monotonic(url: &str) {
    // a table of its own: what is pruned is exactly what this test left
    let table = format!("dlock_prune_{:08x}", random_u64() as u32);
    let locks: SqlLock = SqlLock::builder(url).table(&table).connect().await.unwrap();
    let (released, held, crashed) = (name("released"), name("held"), name("crashed"));
    let (sem_released, sem_crashed) = (name("sem-released"), name("sem-crashed"));

    let r = take(&locks, &released, LONG).await;
    assert!(locks.release(&r).await.unwrap());
    let h = take(&locks, &held, LONG).await;
    let c = take(&locks, &crashed, Duration::from_millis(200)).await;
    let sr = locks
        .try_acquire_permit(&sem_released, 2, LONG)
        .await
        .unwrap()
        .unwrap();
    assert!(locks.release(&sr).await.unwrap());
    let sc = locks
        .try_acquire_permit(&sem_crashed, 2, Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();

    // a waiter that vanished without leaving the queue (its deadline is long past)
    common::raw_execute(
        url,
        &format!(
            "INSERT INTO {table}_queue (name, owner, seq, access, permits, ttl_ms, deadline)
             VALUES ('prune/vanished', 'gone', 1, 'x', 0, 1000, 0)"
        ),
    )
    .await;

    // nothing is idle for a second yet, but the vanished waiter's entry
    let first = locks.prune(IDLE).await.unwrap();
    assert_eq!((first.total(), first.queued), (1, 1), "{first:?}");
    tokio::time::sleep(IDLE * 2 + Duration::from_millis(500)).await;
    let pruned = locks.prune(IDLE).await.unwrap();
    assert_eq!(
        (pruned.locks, pruned.shared, pruned.holders, pruned.queued),
        (2, 2, 1, 0),
        "released + crashed mutexes, both semaphores, the crashed permit: {pruned:?}"
    );
    assert_eq!(locks.prune(IDLE).await.unwrap().total(), 0, "nothing left");

    // the held lock was not touched
    let h2 = locks.renew(&h).await.expect("the held lock is still held");
    assert_eq!(h2.token(), h.token());
    assert!(locks.try_acquire(&held, LONG).await.unwrap().is_none());

    // pruned names start above every token they had
    for (n, old) in [(&released, r.token()), (&crashed, c.token())] {
        let again = take(&locks, n, LONG).await;
        assert!(again.token() > old, "{n}: {} after {}", again.token(), old);
        assert!(locks.release(&again).await.unwrap());
    }
    for (n, old) in [(&sem_released, sr.token()), (&sem_crashed, sc.token())] {
        let again = locks.try_acquire_permit(n, 2, LONG).await.unwrap().unwrap();
        assert!(again.token() > old, "{n}: {} after {}", again.token(), old);
        assert!(locks.release(&again).await.unwrap());
    }
    assert!(locks.release(&h2).await.unwrap());

    assert!(matches!(
        locks.prune(Duration::from_millis(10)).await,
        Err(LockError::InvalidArgument(_))
    ));
}

// through PgBouncer in transaction mode (`pooler=transaction`) too: prune's batches,
// each a transaction of its own, lean on no session either
common::on_databases!(prune_deletes_idle_rows_and_keeps_tokens_monotonic:
    postgres, mysql, sqlite, pgbouncer);
