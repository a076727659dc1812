//! Tickets on ZooKeeper: a handed-over lock node outlives the session that made it,
//! lives as long as the ticket's taker renews it, keeps its place in the queue, and
//! has the TTL asked for.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_conformance::{take, unique_name};
use dlock_core::{DistributedLock, LockError, LockName, Ticket, random_u64};
use dlock_zk::ZkLock;
use tokio::time::{Instant, sleep};

fn unique() -> LockName {
    unique_name("tickets")
}

/// What a test's lease asks for (its TTL is its session's).
const TTL: Duration = Duration::from_secs(2);

/// Sessions of 3 s: leases (and handed-over nodes) of 1.8 s.
async fn client() -> ZkLock {
    ZkLock::builder(&common::single())
        .session_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap()
}

/// The giver hands its lock over and goes away (its session closed, its ephemeral
/// nodes gone): the name stays held by the ticket's taker, past several TTLs, ahead of
/// a waiter that queued before the hand-over. When the taker stops renewing, the waiter
/// gets the lock with a higher token.
#[tokio::test]
async fn a_handed_over_node_outlives_its_giver_and_keeps_its_place() {
    let name = unique();
    let giver = client().await;
    let lease = take(&giver, &name, TTL).await;
    let ttl = lease.ttl();
    let waiter = client().await;
    let waiting = {
        let name = name.clone();
        // queued before the hand-over: its node's zxid is below the swap's, and the
        // token it is granted must still be above the ticket's
        tokio::spawn(async move {
            let lease = waiter.acquire(&name, ttl, Duration::from_secs(60)).await;
            (waiter, lease)
        })
    };
    sleep(Duration::from_millis(300)).await; // the waiter queues behind the holder

    let ticket = giver.hand_over(&lease).await.expect("handed over");
    assert_eq!(ticket.token(), lease.token(), "the lease keeps its token");
    assert!(
        matches!(giver.renew(&lease).await, Err(LockError::LeaseLost { .. })),
        "the giver let go of it"
    );
    drop(giver);

    let taker = client().await;
    let mut taken = taker.resume(&ticket).await.expect("taken up");
    assert_eq!(
        (taken.token(), taken.owner()),
        (ticket.token(), ticket.owner())
    );
    let until = Instant::now() + ttl * 4;
    while Instant::now() < until {
        sleep(ttl / 3).await;
        taken = taker.renew(&taken).await.expect("the taker renews");
    }
    assert!(
        !waiting.is_finished(),
        "the waiter is still behind the ticket"
    );
    let held = taker.inspect(&name).await.unwrap().expect("held");
    assert_eq!(held.token, ticket.token());

    // the taker stops: the node expires (its TTL, then the server's next look)
    let stopped = Instant::now();
    let (waiter, next) = waiting.await.unwrap();
    let next = next.expect("the waiter gets the lock once the ticket's node runs out");
    assert!(stopped.elapsed() >= ttl.saturating_sub(Duration::from_millis(200)));
    assert!(next.token() > ticket.token());
    assert!(matches!(
        taker.renew(&taken).await,
        Err(LockError::LeaseLost { .. })
    ));
    assert!(waiter.release(&next).await.unwrap());
}

/// A ticket's taker cannot renew with another TTL (a handed-over node keeps its own),
/// and releases: the name is free at once and the ticket is dead. The ticket has the
/// TTL the acquisition asked for, cut to whole milliseconds as the server keeps it (not
/// its session's), and its lease ends a tenth of it (the servers' clock bound) and the
/// drift margin before it.
#[tokio::test]
async fn a_taker_keeps_the_ttl_and_releases() {
    let name = unique();
    let giver = client().await;
    let asked = Duration::from_micros(2_000_600);
    let lease = take(&giver, &name, asked).await;
    assert!(lease.ttl() < asked, "a session's lease: {:?}", lease.ttl());
    let ticket = giver.hand_over(&lease).await.expect("handed over");
    assert_eq!(ticket.ttl(), Duration::from_millis(2000));
    let taker = client().await;
    let sent = Instant::now();
    let taken = taker.resume(&ticket).await.expect("taken up");
    assert_eq!(taken.ttl(), ticket.ttl());
    assert!(
        taken.valid_until() <= sent + ticket.ttl() * 9 / 10,
        "trusted past the servers' clock bound: {:?} of a {:?} ticket",
        taken.valid_until() - sent,
        ticket.ttl()
    );
    let taken = taker.renew(&taken).await.expect("renewed");
    let longer = taken.renewed(taken.ttl() * 2, Instant::now());
    assert!(matches!(
        taker.renew(&longer).await,
        Err(LockError::InvalidArgument(_))
    ));
    let held = giver.inspect(&name).await.unwrap().expect("held");
    assert_eq!(held.token, ticket.token());
    assert!(held.remaining <= ticket.ttl());
    assert!(taker.release(&taken).await.unwrap());
    assert!(taker.inspect(&name).await.unwrap().is_none());
    the_ticket_is_dead_and_the_name_free(&giver, &name, &ticket).await;
}

/// A ticket for a node that was never handed over (still an ephemeral of a live
/// session) is refused as such: taking it up could not keep it alive.
#[tokio::test]
async fn a_ticket_not_handed_over_is_refused() {
    let name = unique();
    let giver = client().await;
    let lease = take(&giver, &name, TTL).await;
    let written = dlock_core::Ticket::of("zookeeper", &lease).unwrap();
    let taker = client().await;
    assert!(matches!(
        taker.resume(&written).await,
        Err(LockError::InvalidArgument(_))
    ));
    assert!(
        giver.renew(&lease).await.is_ok(),
        "the giver still holds it"
    );
    assert!(giver.release(&lease).await.unwrap());
}

/// On servers without TTL nodes (ZooKeeper's default) a hand-over is refused as
/// unsupported, naming the server flag, and the lock stays with its holder.
#[tokio::test]
async fn servers_without_ttl_nodes_refuse_and_the_holder_keeps_the_lock() {
    let dir = std::env::temp_dir().join(format!("dlock-zk-no-ttl-{:016x}", random_u64()));
    let (_server, addr) = dlock_conformance::standalone_zk(&dir, &[]);
    let giver = common::zk_timed(&addr, Duration::from_secs(3), Duration::from_secs(10)).await;
    let name = unique();
    let lease = take(&giver, &name, TTL).await;
    match giver.hand_over(&lease).await {
        Err(LockError::Unsupported { what, .. }) => {
            assert!(
                what.contains("zookeeper.extendedTypesEnabled=true"),
                "{what}"
            );
        }
        other => panic!("a hand-over without TTL nodes: {other:?}"),
    }
    // taking up any ticket is refused the same way (`dlock acquire` asks first)
    let probe = dlock_core::Ticket::new(
        "zookeeper",
        unique(),
        dlock_core::OwnerId::from_stored("probe"),
        dlock_core::FencingToken::new(0),
        Duration::from_secs(2),
    );
    assert!(matches!(
        giver.resume(&probe).await,
        Err(LockError::Unsupported { .. })
    ));
    let renewed = giver.renew(&lease).await.expect("still held");
    assert_eq!(renewed.token(), lease.token());
    assert!(giver.release(&lease).await.unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A ticket renewed after its TTL, before the server deleted its node (its container
/// manager looks once a minute by default), still holds the name: the renewal's child
/// keeps the node, and the expired one's delete, decided or not, takes only that
/// child. The name stays held, ahead of a waiter, until the taker releases.
#[tokio::test]
async fn a_ticket_renewed_late_before_its_node_went_holds() {
    let dir = std::env::temp_dir().join(format!("dlock-zk-slow-ttl-{:016x}", random_u64()));
    let (_server, addr) =
        dlock_conformance::standalone_zk(&dir, &["-Dzookeeper.extendedTypesEnabled=true"]);
    let connect =
        || async { common::zk_timed(&addr, Duration::from_secs(2), Duration::from_secs(10)).await };
    let (giver, taker) = (connect().await, connect().await);
    let name = unique();
    let lease = take(&giver, &name, Duration::from_secs(1)).await;
    let ticket = giver.hand_over(&lease).await.expect("handed over");
    drop(giver);
    sleep(ticket.ttl() + Duration::from_millis(500)).await;
    let taken = taker
        .resume(&ticket)
        .await
        .expect("late, but the node was there");
    assert!(
        taker
            .try_acquire(&name, Duration::from_secs(1))
            .await
            .unwrap()
            .is_none(),
        "held"
    );
    let renewed = taker.renew(&taken).await.expect("renewed");
    assert!(taker.release(&renewed).await.unwrap());
    the_ticket_is_dead_and_the_name_free(&taker, &name, &ticket).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a server with ZooKeeper's own session limits (sessions of 40 s at most), a
/// ticket asked for ten minutes has ten minutes — not 3/5 of a clamped session — and
/// its taker trusts it for nine: a TTL node is not bound by the session limits.
#[tokio::test]
async fn a_ticket_has_the_ttl_asked_for_whatever_the_session_limits() {
    let dir = std::env::temp_dir().join(format!("dlock-zk-stock-{:016x}", random_u64()));
    let (_server, addr) =
        dlock_conformance::stock_zk(&dir, &["-Dzookeeper.extendedTypesEnabled=true"]);
    let giver = common::zk_timed(&addr, Duration::from_secs(20), Duration::from_secs(10)).await;
    let ten_minutes = Duration::from_secs(600);
    let name = unique();
    let lease = take(&giver, &name, ten_minutes).await;
    assert!(
        lease.ttl() <= Duration::from_secs(24),
        "the session is clamped: {:?}",
        lease.ttl()
    );
    let ticket = giver.hand_over(&lease).await.expect("handed over");
    assert_eq!(ticket.ttl(), ten_minutes);
    drop(giver);
    let taker = common::zk_timed(&addr, Duration::from_secs(20), Duration::from_secs(10)).await;
    let taken = taker.resume(&ticket).await.expect("taken up");
    assert_eq!(taken.ttl(), ten_minutes);
    assert!(
        taken.remaining() > Duration::from_secs(500),
        "{:?}",
        taken.remaining()
    );
    assert!(taker.release(&taken).await.unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ticket` is refused, and `name` is free at once, for a holder with a higher token.
async fn the_ticket_is_dead_and_the_name_free(client: &ZkLock, name: &LockName, ticket: &Ticket) {
    assert!(matches!(
        client.resume(ticket).await,
        Err(LockError::LeaseLost { .. })
    ));
    let next = take(client, name, Duration::from_secs(1)).await;
    assert!(next.token() > ticket.token());
    assert!(client.release(&next).await.unwrap());
}
