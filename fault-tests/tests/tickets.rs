//! ZooKeeper tickets under the faults their nodes meet: the servers' wall clocks, by
//! which a ticket's node expires, stepped within the bound docs/safety.md allows; the
//! leader killed with a ticket held; a container manager with a backlog of deletes it
//! decided earlier, and a renewal whose reply was lost, retried. A waiter may take the
//! lock only once the ticket's lease is over, with a higher token.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use std::sync::Arc;

use dlock_any::{DistributedLock, Lease, LockError, LockName, random_u64};
use dlock_conformance::{EnsembleOptions, FaultMode, FaultProxy, PartitionableEnsemble, take};
use dlock_faults::clock::FakeClock;
use tokio::time::Instant;

/// A ticket's TTL: long beside the container manager's look (every 100 ms in the clock
/// drill), so that a tenth of it is more than the look's own jitter; a whole number of
/// seconds a tenth of which is too (the stepping clock steps whole seconds).
const TTL: Duration = Duration::from_secs(10);

fn name(case: &str) -> LockName {
    LockName::new(&format!("faults/tickets/{case}/{:016x}", random_u64())).unwrap()
}

async fn client(addrs: &[String]) -> Arc<dyn DistributedLock> {
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
    eprintln!(
        "clock a tenth ahead: the waiter got the lock {:?} after the lease's end",
        granted - taken.valid_until()
    );
    assert!(next.token() > ticket.token());
    drop(ensemble);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A waiter for `name` on its own task: when it got the lock, and the lease.
fn waiter(
    lock: Arc<dyn DistributedLock>,
    name: &LockName,
) -> tokio::task::JoinHandle<(Instant, Lease)> {
    let name = name.clone();
    tokio::spawn(async move {
        let lease = lock
            .acquire(&name, Duration::from_secs(5), Duration::from_secs(120))
            .await
            .expect("the waiter gets the lock once the ticket's node is gone");
        (Instant::now(), lease)
    })
}

/// Renews `lease` every `every` until `until`, riding out errors (an outage, a reply
/// that never came) as a ticket's taker would, until a renewal says the lease is lost;
/// the last deadline it trusted.
async fn keep_renewing(
    taker: &dyn DistributedLock,
    mut lease: Lease,
    every: Duration,
    until: Instant,
) -> Instant {
    let mut trusted = lease.valid_until();
    while Instant::now() < until {
        tokio::time::sleep(every).await;
        match taker.renew(&lease).await {
            Ok(renewed) => {
                trusted = trusted.max(renewed.valid_until());
                lease = renewed;
            }
            Err(LockError::LeaseLost { .. }) => break,
            Err(_) => {}
        }
    }
    trusted
}

/// The leader killed while a ticket is held and renewed: the renewals go on through the
/// new leader (the ticket's node and its children are in the replicated tree), and the
/// waiter gets the lock only after the last renewal's lease ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_under_a_ticket_lets_no_waiter_in_while_it_is_trusted() {
    let dir = std::env::temp_dir().join(format!("dlock-faults-tickets-{:016x}", random_u64()));
    let mut ensemble = PartitionableEnsemble::start_with(&dir, &EnsembleOptions::default()).await;
    let addrs = ensemble.client_addrs.clone();
    let (giver, taker) = (client(&addrs).await, client(&addrs).await);
    let name = name("leader-killed");
    let ttl = Duration::from_secs(6);
    let lease = take(&*giver, &name, ttl).await;
    let ticket = giver.hand_over(&lease).await.expect("handed over");
    let waiting = waiter(client(&addrs).await, &name);
    let taken = taker.resume(&ticket).await.expect("taken up");
    let leader = ensemble.leader().await.expect("a leader");
    ensemble.kill(leader);
    let trusted = keep_renewing(&*taker, taken, ttl / 3, Instant::now() + ttl * 2).await;
    let (granted, next) = waiting.await.unwrap();
    assert!(
        granted >= trusted,
        "the waiter got the lock {:?} before the ticket's lease ended",
        trusted - granted
    );
    eprintln!(
        "the waiter got the lock {:?} after the lease's end",
        granted - trusted
    );
    assert!(next.token() > ticket.token());
    drop(ensemble);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The container manager deletes slowly (one node a second) behind a backlog of 15 empty
/// queue nodes, so a delete it decides lands long after; meanwhile the taker renews
/// late — after the TTL of its last renewal — through a connection whose replies are
/// held back past its timeout, and retries. Whatever the manager decided on the way, the
/// waiter gets the lock only after the last renewal the taker trusted has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_backlog_and_a_lost_reply_let_no_waiter_in_while_the_ticket_is_trusted() {
    let dir = std::env::temp_dir().join(format!("dlock-faults-tickets-{:016x}", random_u64()));
    let options = EnsembleOptions {
        flags: vec!["-Dznode.container.maxPerMinute=60".to_owned()],
        ..EnsembleOptions::default()
    };
    let ensemble = PartitionableEnsemble::start_with(&dir, &options).await;
    let addrs = ensemble.client_addrs.clone();
    // the backlog: queues of names released at once, their empty nodes to delete
    let filler = client(&addrs).await;
    for i in 0..15 {
        let n = name(&format!("backlog-{i}"));
        let l = take(&*filler, &n, Duration::from_secs(5)).await;
        filler.release(&l).await.unwrap();
    }
    let proxy = FaultProxy::start(&addrs[0]).await.unwrap();
    let taker = dlock_any::connect(&format!(
        "zk://{}?session_timeout=4s&timeout=500ms",
        proxy.addr()
    ))
    .await
    .unwrap();
    let giver = client(&addrs).await;
    let name = name("backlog");
    let ttl = Duration::from_secs(3);
    let lease = take(&*giver, &name, ttl).await;
    let ticket = giver.hand_over(&lease).await.expect("handed over");
    let waiting = waiter(client(&addrs).await, &name);
    let taken = taker.resume(&ticket).await.expect("taken up");
    let mut trusted = taken.valid_until();
    // late: past the TTL of the last renewal, its child up for deletion
    tokio::time::sleep(ttl + Duration::from_millis(1500)).await;
    proxy.set_mode(FaultMode::DelayReplies(Duration::from_secs(2)));
    let first = taker.renew(&taken).await; // sent and applied, its reply held back
    proxy.set_mode(FaultMode::Pass);
    assert!(
        first.is_err(),
        "the held-back reply came in time: {first:?}"
    );
    // the retry: renewed (the node was still there) or lost, never trusted past a delete
    for _ in 0..5 {
        match taker.renew(&taken).await {
            Ok(again) => {
                trusted = trusted.max(again.valid_until());
                break;
            }
            Err(LockError::LeaseLost { .. }) => break,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let (granted, next) = waiting.await.unwrap();
    assert!(
        granted >= trusted,
        "the waiter got the lock {:?} before the ticket's lease ended",
        trusted - granted
    );
    eprintln!(
        "the waiter got the lock {:?} after the lease's end",
        granted - trusted
    );
    assert!(next.token() > ticket.token());
    drop(ensemble);
    let _ = std::fs::remove_dir_all(&dir);
}
