//! Leases carried between clients by a ticket, and listing the held locks.

use std::time::Duration;

use dlock_core::{LockError, LockName, Ticket};

use super::{LONG_TTL, clients_and_name, take};
use crate::Harness;

/// The backends whose lease cannot leave the process that took it: a memory lock is
/// the process's own.
const NO_TICKETS: [&str; 1] = ["memory"];

/// A ticket handed over by one client is taken up by another, which can renew (past
/// the TTL) and release the lease; a ticket whose lease is gone, or of another
/// backend, is refused.
pub async fn tickets_carry_a_lease_between_clients(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "tickets").await;
    let lease = take(&*a, &name, LONG_TTL).await;
    let ticket: Ticket = match a.hand_over(&lease).await {
        // refused before anything moved: the lease is still held here
        Err(LockError::Unsupported { backend, .. }) => {
            assert!(NO_TICKETS.contains(&backend), "{backend} refused tickets");
            assert!(a.release(&lease).await.expect("release"));
            return;
        }
        other => other
            .expect("a mutex lease has a ticket")
            .to_string()
            .parse()
            .expect("a ticket reads back"),
    };
    let resumed = b.resume(&ticket).await.expect("resume");
    assert!(
        !NO_TICKETS.contains(&a.backend_name()),
        "{} took a ticket up",
        a.backend_name()
    );
    assert_eq!(
        (resumed.name(), resumed.owner(), resumed.token()),
        (lease.name(), lease.owner(), lease.token())
    );
    assert!(resumed.is_valid() && resumed.remaining() <= LONG_TTL);
    let renewed = b.renew(&resumed).await.expect("the taker renews");
    // the ticket's TTL: the lease's (LONG_TTL, or what the backend made of it), or on
    // ZooKeeper the one asked for (a ticket's node is not bound by the session's)
    assert_eq!(renewed.ttl(), ticket.ttl());
    // handed over, the lease is the ticket's: not renewed or released here
    assert!(matches!(
        a.renew(&lease).await,
        Err(LockError::LeaseLost { .. })
    ));
    assert!(renewed.remaining() > renewed.ttl() / 2);
    // a ticket naming another backend, or another token, is refused
    let foreign = Ticket::new(
        "elsewhere",
        name.clone(),
        lease.owner().clone(),
        lease.token(),
        LONG_TTL,
    );
    assert!(matches!(
        b.resume(&foreign).await,
        Err(LockError::InvalidArgument(_))
    ));
    let forged = Ticket::new(
        a.backend_name(),
        name.clone(),
        lease.owner().clone(),
        dlock_core::FencingToken::new(lease.token().get() + 1),
        LONG_TTL,
    );
    assert!(matches!(
        b.resume(&forged).await,
        Err(LockError::LeaseLost { .. })
    ));
    // the taker's release is the lease's: the writer's own lease is gone with it
    assert!(b.release(&renewed).await.expect("the taker releases"));
    assert!(!a.release(&lease).await.expect("release of a gone lease"));
    assert!(matches!(
        b.resume(&ticket).await,
        Err(LockError::LeaseLost { .. })
    ));
    let next = take(&*a, &name, LONG_TTL).await;
    assert!(matches!(
        b.resume(&ticket).await,
        Err(LockError::LeaseLost { .. })
    ));
    assert!(a.release(&next).await.expect("release"));
}

/// A guard whose lease was handed over — through [`dlock_core::LockGuard::hand_over`],
/// or by passing the guard's lease to `hand_over` and then dropping the guard — never
/// releases the ticket's lock: the ticket's taker still holds it, ahead of a waiter,
/// and renews it.
pub async fn a_handed_over_guard_leaves_the_ticket_its_lock(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "handed-guard").await;
    let locker = dlock_core::Locker::new(a.lock()).with_ttl(LONG_TTL);
    let guard = locker.lock(name.as_str()).await.expect("lock");
    let ticket = match guard.hand_over().await {
        Err(LockError::Unsupported { backend, .. }) => {
            assert!(NO_TICKETS.contains(&backend), "{backend} refused tickets");
            return; // given back: the name is free
        }
        other => other.expect("handed over"),
    };
    still_the_tickets(&*a, &*b, &name, &ticket).await;
    let second = LockName::new(&format!("{name}-2")).expect("name");
    let guard = locker.lock(second.as_str()).await.expect("lock");
    let ticket = a.hand_over(&guard.lease()).await.expect("handed over");
    drop(guard); // its release in the background must leave the ticket's lock alone
    tokio::time::sleep(Duration::from_millis(300)).await;
    still_the_tickets(&*a, &*b, &second, &ticket).await;
}

/// `name` is still held by `ticket`'s lease: `b` takes it up and renews it while `a`
/// finds it busy, then releases it.
async fn still_the_tickets(
    a: &dyn dlock_core::DistributedLock,
    b: &dyn dlock_core::DistributedLock,
    name: &LockName,
    ticket: &Ticket,
) {
    let taken = b.resume(ticket).await.expect("the ticket's lease is alive");
    assert!(
        a.try_acquire(name, LONG_TTL).await.expect("try").is_none(),
        "{name} was freed behind the ticket"
    );
    let renewed = b.renew(&taken).await.expect("the taker renews");
    assert!(b.release(&renewed).await.expect("the taker releases"));
}

/// `list` shows each held lock under a prefix with its holder, and no other; a waiter
/// counts where the backend can tell.
pub async fn list_shows_held_locks(h: &impl Harness) {
    let ([a, b], root) = clients_and_name(h, "list").await;
    let prefix = format!("{root}/");
    let named = |s: &str| LockName::new(&format!("{prefix}{s}")).expect("name");
    let (first, second) = (named("a"), named("b"));
    let outside = LockName::new(&format!("{root}-other")).expect("name");
    let la = take(&*a, &first, LONG_TTL).await;
    let lb = take(&*a, &second, LONG_TTL).await;
    let lo = take(&*a, &outside, LONG_TTL).await;
    let waiter = {
        let b = b.clone();
        let second = second.clone();
        tokio::spawn(async move { b.acquire(&second, LONG_TTL, Duration::from_secs(20)).await })
    };
    // the waiter queues: on etcd and ZooKeeper the list counts it once it has
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    let held = loop {
        let listed = a.list(&prefix).await;
        match &listed {
            Ok(h)
                if h.len() == 2 && h[1].waiters == Some(0) && tokio::time::Instant::now() < end =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            _ => break listed,
        }
    };
    let held = match held {
        Err(LockError::Unsupported { backend, what }) => {
            // a process-local lock, and Redis's plain layout, whose keys look like any
            // other program's
            assert!(
                backend == "memory" || what.contains("plain key layout"),
                "{backend} cannot list: {what}"
            );
            waiter.abort();
            for l in [&la, &lb, &lo] {
                assert!(a.release(l).await.expect("release"));
            }
            return;
        }
        other => other.expect("list"),
    };
    let names: Vec<&LockName> = held.iter().map(|h| &h.name).collect();
    assert_eq!(names, vec![&first, &second], "{held:?}");
    for (h, l) in held.iter().zip([&la, &lb]) {
        assert_eq!((&h.holder.owner, h.holder.token), (l.owner(), l.token()));
        assert!(h.holder.remaining > Duration::ZERO);
    }
    assert!(matches!(held[0].waiters, None | Some(0)), "{held:?}");
    assert!(matches!(held[1].waiters, None | Some(1)), "{held:?}");
    assert!(a.release(&lb).await.expect("release"));
    let next = waiter.await.expect("waiter").expect("the waiter gets it");
    assert!(a.release(&la).await.expect("release"));
    let held = a.list(&prefix).await.expect("list");
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        (&held[0].name, &held[0].holder.owner),
        (&second, next.owner())
    );
    assert!(b.release(&next).await.expect("release"));
    assert!(a.release(&lo).await.expect("release"));
    assert!(a.list(&prefix).await.expect("list").is_empty());
}
