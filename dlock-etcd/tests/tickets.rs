//! Tickets on etcd: a handed-over key leaves the client's shared lease and its
//! bookkeeping, so neither that client nor the ticket's taker keeps the other's keys
//! alive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{take, unique_name};
use dlock_core::{DistributedLock, LockError, LockName, Locker};
use tokio::time::{Instant, sleep};

fn unique() -> LockName {
    unique_name("tickets")
}

/// A client that stays up holds one name under a guard and hands the other over, on
/// the same shared lease. The taker renews the handed-over name past the TTL: it stays
/// held (the handing client's sweeper leaves it alone), and the handing client can no
/// longer renew it. When the taker stops, the name is free within the TTL, although the
/// handing client still keeps its shared lease alive for the guarded name.
#[tokio::test]
async fn a_handed_over_key_lives_by_its_taker_alone() {
    let ttl = Duration::from_secs(3);
    let (kept, handed) = (unique(), unique());
    let giver: Arc<dyn DistributedLock> = Arc::new(common::etcd(&common::single()).await);
    let guard = Locker::new(Arc::clone(&giver))
        .with_ttl(ttl)
        .lock(&kept)
        .await
        .unwrap();
    let lease = take(&giver, &handed, ttl).await;
    let ticket = giver.hand_over(&lease).await.unwrap();
    assert!(
        matches!(giver.renew(&lease).await, Err(LockError::LeaseLost { .. })),
        "the giver let go of it"
    );

    let taker = common::etcd(&common::single()).await;
    let mut taken = taker.resume(&ticket).await.expect("taken up");
    assert_eq!(taken.token(), lease.token());
    let until = Instant::now() + ttl * 2;
    while Instant::now() < until {
        sleep(Duration::from_millis(700)).await;
        taken = taker.renew(&taken).await.expect("the taker renews");
    }
    let held = taker
        .inspect(&handed)
        .await
        .unwrap()
        .expect("held past the TTL");
    assert_eq!(held.token, lease.token());

    // the taker stops: the name frees within the TTL (and the etcd minimum) though the
    // giver's shared lease lives on for the guarded name
    let stopped = Instant::now();
    loop {
        if taker.inspect(&handed).await.unwrap().is_none() {
            break;
        }
        assert!(
            stopped.elapsed() < ttl + Duration::from_secs(3),
            "the handed-over name outlived its taker"
        );
        sleep(Duration::from_millis(100)).await;
    }
    assert!(guard.is_held(), "the guarded name is unaffected");
    assert!(giver.inspect(&kept).await.unwrap().is_some());
    guard.release().await.unwrap();
}

/// A ticket written without handing the lease over (its key still on the writer's
/// shared lease) is refused: taking it up would keep that shared lease alive.
#[tokio::test]
async fn a_ticket_not_handed_over_is_refused() {
    let giver = common::etcd(&common::single()).await;
    let name = unique();
    let lease = take(&giver, &name, Duration::from_secs(5)).await;
    let ticket = dlock_core::Ticket::of("etcd", &lease).unwrap();
    let taker = common::etcd(&common::single()).await;
    assert!(matches!(
        taker.resume(&ticket).await,
        Err(LockError::InvalidArgument(_))
    ));
    assert!(giver.release(&lease).await.unwrap());
}

/// Only the client that took a lease hands it over, and only while it holds it.
#[tokio::test]
async fn only_a_held_lease_is_handed_over_by_its_own_client() {
    let ttl = Duration::from_secs(2);
    let (taker, other) = (
        common::etcd(&common::single()).await,
        common::etcd(&common::single()).await,
    );
    let name = unique();
    let lease = take(&taker, &name, ttl).await;
    assert!(
        matches!(
            other.hand_over(&lease).await,
            Err(LockError::InvalidArgument(_))
        ),
        "another client's bookkeeping does not know the key"
    );
    sleep(ttl + Duration::from_millis(500)).await; // unrenewed: past its valid_until
    assert!(matches!(
        taker.hand_over(&lease).await,
        Err(LockError::LeaseLost { .. })
    ));
}

/// A handed-over lease released with a linger keeps the name blocked, and its ticket
/// is lost: nobody takes it up again.
#[tokio::test]
async fn a_lingering_release_ends_the_ticket() {
    let giver = common::etcd(&common::single()).await;
    let name = unique();
    let lease = take(&giver, &name, Duration::from_secs(10)).await;
    let ticket = giver.hand_over(&lease).await.unwrap();
    let taker = common::etcd(&common::single()).await;
    let taken = taker.resume(&ticket).await.expect("taken up");
    assert!(
        taker
            .release_after(&taken, Duration::from_secs(5))
            .await
            .unwrap()
    );
    assert!(
        taker.inspect(&name).await.unwrap().is_some(),
        "still blocked"
    );
    assert!(matches!(
        taker.resume(&ticket).await,
        Err(LockError::LeaseLost { .. })
    ));
}
