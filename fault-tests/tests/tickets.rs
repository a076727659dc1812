//! ZooKeeper tickets under the faults their nodes meet: the servers' wall clocks, by
//! which a ticket's node expires, stepped within the bound docs/safety.md allows; the
//! leader killed with a ticket held. A waiter may take the lock only once the ticket's
//! lease is over.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_any::{DistributedLock, LockName, random_u64};
use dlock_conformance::{EnsembleOptions, PartitionableEnsemble, take};
use dlock_faults::clock::FakeClock;
use tokio::time::Instant;

/// A ticket's TTL: long beside the container manager's look every second, so that a
/// tenth of it is more than the look's own jitter.
const TTL: Duration = Duration::from_secs(20);

fn name(case: &str) -> LockName {
    LockName::new(&format!("faults/tickets/{case}/{:016x}", random_u64())).unwrap()
}

async fn client(addrs: &[String]) -> std::sync::Arc<dyn DistributedLock> {
    dlock_any::connect(&format!(
        "zk://{}?session_timeout=2s&timeout=2s",
        addrs.join(",")
    ))
    .await
    .unwrap()
}

/// The wall-clock stamp the servers give a node created now, in milliseconds.
async fn server_now(addr: &str) -> i64 {
    let c = zookeeper_client::Client::connect(addr).await.unwrap();
    let path = format!("/clock-probe-{:016x}", random_u64());
    let mode =
        zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
    let (stat, _) = c.create(&path, b"", &mode).await.unwrap();
    c.delete(&path, None).await.unwrap();
    stat.ctime
}

/// Every server's wall clock steps a tenth of the TTL ahead (the most docs/safety.md
/// allows between the clock that stamped a ticket's renewal and the one that judges
/// it) right after the taker's renewal: whichever server leads judges the node that
/// much older. A waiter queued behind the ticket must get the lock only after the
/// taker's lease ended — the lease ends that tenth (and the drift margin) before the
/// TTL, so the node's early end lands after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_clock_a_tenth_ahead_lets_no_waiter_in_while_the_ticket_is_trusted() {
    let dir = std::env::temp_dir().join(format!("dlock-faults-tickets-{:016x}", random_u64()));
    let clock = FakeClock::stepping(&dir).unwrap();
    let options = EnsembleOptions {
        env: clock
            .env(false)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        // the container manager looks every 100 ms: a node goes within that of the
        // moment its leader judges it expired, so the test sees the judgement itself
        flags: vec!["-Dznode.container.checkIntervalMs=100".to_owned()],
        ..EnsembleOptions::default()
    };
    let ensemble = PartitionableEnsemble::start_with(&dir, &options).await;
    let addrs = ensemble.client_addrs.clone();
    let (giver, taker, waiter) = (
        client(&addrs).await,
        client(&addrs).await,
        client(&addrs).await,
    );
    let name = name("clock-ahead");
    let lease = take(&*giver, &name, TTL).await;
    let ticket = giver.hand_over(&lease).await.expect("handed over");
    assert_eq!(ticket.ttl(), TTL, "the ticket has the TTL asked for");
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move {
            let lease = waiter
                .acquire(&name, Duration::from_secs(5), Duration::from_secs(90))
                .await
                .expect("the waiter gets the lock once the ticket's node is gone");
            (Instant::now(), lease)
        })
    };
    let taken = taker.resume(&ticket).await.expect("taken up");
    let before = server_now(&addrs[0]).await;
    clock.set(&format!("+{}", (TTL / 10).as_secs())).unwrap();
    let after = server_now(&addrs[0]).await;
    assert!(
        after - before >= i64::try_from((TTL / 10).as_millis()).unwrap(),
        "the servers' clocks did not step: {before} then {after}"
    );
    let (granted, next) = waiting.await.unwrap();
    assert!(
        granted >= taken.valid_until(),
        "the waiter got the lock {:?} before the ticket's lease ended",
        taken.valid_until() - granted
    );
    assert!(next.token() > ticket.token());
    drop(ensemble);
    let _ = std::fs::remove_dir_all(&dir);
}
