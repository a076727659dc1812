//! Holder values and leader election, built in core on every backend's lock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dlock_core::{Election, HolderValue, LockError};
use tokio::time::Instant;

use super::{LONG_TTL, clients_and_name, unique};
use crate::Harness;

/// A value given at acquisition is what every client's `inspect` reports for that
/// holder, and goes with its lease.
pub async fn holder_value_is_readable(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "holder_value_is_readable").await;
    // every byte class: plain, escaped, path separators, non-ASCII
    let va = HolderValue::new("host-7.example:8080 /ä%").expect("valid");
    let vb = HolderValue::new("10.0.0.2:9092").expect("valid");
    let lease = a
        .lock()
        .try_acquire_with_value(&name, LONG_TTL, &va)
        .await
        .expect("try_acquire_with_value")
        .expect("free");
    assert_eq!(lease.value(), Some(va.clone()));
    let info = b.inspect(&name).await.expect("inspect").expect("held");
    assert_eq!(info.value(), Some(va.clone()), "{info:?}");
    assert_eq!(&info.owner, lease.owner());
    assert!(
        b.lock()
            .try_acquire_with_value(&name, LONG_TTL, &vb)
            .await
            .expect("try")
            .is_none(),
        "a value does not change exclusion"
    );
    assert!(a.release(&lease).await.expect("release"));
    assert!(b.inspect(&name).await.expect("inspect").is_none());

    let next = b
        .lock()
        .acquire_with_value(&name, LONG_TTL, Duration::from_secs(5), &vb)
        .await
        .expect("acquire_with_value");
    assert!(next.token() > lease.token());
    let info = a.inspect(&name).await.expect("inspect").expect("held");
    assert_eq!(info.value(), Some(vb));
    assert!(b.release(&next).await.expect("release"));

    let plain = super::take(&*a, &name, LONG_TTL).await;
    let info = b.inspect(&name).await.expect("inspect").expect("held");
    assert_eq!(info.value(), None, "a plain acquisition carries no value");
    assert!(a.release(&plain).await.expect("release"));
}

/// Candidates on several clients campaign round after round while an observer
/// follows: never two leaders at once, epochs strictly increasing in the order the
/// leaderships were won, and the observer's epochs strictly increasing too.
pub async fn one_leader_at_a_time(h: &impl Harness) {
    let name = unique("one_leader_at_a_time");
    let (clients, _) = h.workload();
    let (clients, rounds) = (clients.clamp(3, 4), 5);
    let leading = Arc::new(AtomicUsize::new(0));
    let won = Arc::new(Mutex::new(Vec::new()));
    let observed = Arc::new(Mutex::new(Vec::new()));

    let watcher = Election::new(h.client().await.lock(), name.as_str()).expect("election");
    let seen = Arc::clone(&observed);
    let observer = tokio::spawn(async move {
        let mut changes = watcher.observe();
        loop {
            if let Ok(Some(l)) = changes.next().await {
                seen.lock().expect("poisoned").push(l.epoch);
            }
        }
    });

    let mut tasks = Vec::new();
    for i in 0..clients {
        let c = h.client().await;
        let (leading, won, name) = (Arc::clone(&leading), Arc::clone(&won), name.clone());
        let seen = Arc::clone(&observed);
        tasks.push(tokio::spawn(async move {
            let election = Election::new(c.lock(), name.as_str())
                .expect("election")
                .with_ttl(LONG_TTL);
            let me = format!("candidate-{i}");
            for _ in 0..rounds {
                let l = election
                    .campaign_for(&me, Duration::from_secs(60))
                    .await
                    .expect("campaign");
                assert_eq!(leading.fetch_add(1, Ordering::SeqCst), 0, "two leaders");
                let first = {
                    let mut won = won.lock().expect("poisoned");
                    won.push(l.epoch());
                    won.len() == 1
                };
                // the first leadership lasts until the observer saw it (or 10 s): the
                // others last 2 ms, shorter than a loaded machine's scheduling delay
                let end = tokio::time::Instant::now() + Duration::from_secs(10);
                while first
                    && seen.lock().expect("poisoned").is_empty()
                    && tokio::time::Instant::now() < end
                {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let leader = election.leader().await.expect("leader").expect("a leader");
                assert_eq!(leader.value.as_deref(), Some(me.as_str()));
                assert_eq!(leader.epoch, l.epoch());
                tokio::time::sleep(Duration::from_millis(2)).await;
                leading.fetch_sub(1, Ordering::SeqCst);
                assert!(l.resign().await.expect("resign"));
            }
            drop(c);
        }));
    }
    crate::steps::join_within(tasks, Duration::from_secs(120), "the campaigns finish").await;
    observer.abort();
    let won = won.lock().expect("poisoned").clone();
    assert_eq!(won.len(), clients * rounds);
    assert!(
        won.windows(2).all(|w| w[0] < w[1]),
        "epochs must increase: {won:?}"
    );
    let observed = observed.lock().expect("poisoned").clone();
    assert!(!observed.is_empty(), "the observer saw no leader");
    assert!(
        observed.windows(2).all(|w| w[0] <= w[1]),
        "the observer went back in epoch: {observed:?}"
    );
    assert!(observed.iter().all(|e| won.contains(e)), "{observed:?}");
}

/// After the leader resigns, an observer reports the standby that took over, with a
/// higher epoch, well within a generous bound.
pub async fn observe_sees_the_next_leader(h: &impl Harness) {
    let (a, b, c) = (h.client().await, h.client().await, h.client().await);
    let name = unique("observe_sees_the_next_leader");
    let ea = Election::new(a.lock(), name.as_str()).expect("election");
    let eb = Election::new(b.lock(), name.as_str()).expect("election");
    let ec = Election::new(c.lock(), name.as_str()).expect("election");
    let mut changes = ec.observe();
    assert_eq!(
        changes.next().await.expect("observe"),
        None,
        "vacant at first"
    );

    let la = ea
        .campaign_for("a", Duration::from_secs(5))
        .await
        .expect("a leads");
    let first = tokio::time::timeout(Duration::from_secs(5), changes.next())
        .await
        .expect("the observer sees the first leader")
        .expect("observe")
        .expect("a leader");
    assert_eq!(first.value.as_deref(), Some("a"));
    assert_eq!(first.epoch, la.epoch());

    let standby = tokio::spawn(async move { eb.campaign_for("b", Duration::from_secs(30)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let resigned = Instant::now();
    assert!(la.resign().await.expect("resign"));
    let next = loop {
        let change = tokio::time::timeout(Duration::from_secs(10), changes.next())
            .await
            .expect("the observer sees the change")
            .expect("observe");
        if let Some(l) = change {
            break l;
        }
    };
    let took = resigned.elapsed();
    assert_eq!(next.value.as_deref(), Some("b"));
    assert!(next.epoch > first.epoch);
    assert!(took < Duration::from_secs(5), "observed after {took:?}");
    let lb = standby.await.expect("task").expect("b leads");
    assert_eq!(lb.epoch(), next.epoch);
    let leader = ec.leader().await.expect("leader").expect("b");
    assert_eq!(leader.value.as_deref(), Some("b"));
    assert!(lb.resign().await.expect("resign"));
}

/// A leader that crashes stops being a leader — its lease's `valid_until`, where its
/// `lost()` fires — no later than the moment a standby wins the next leadership.
pub async fn leadership_is_lost_before_the_next_leader_wins(h: &impl Harness) {
    let (a, b) = (h.client().await, h.client().await);
    let name = unique("leadership_is_lost_before_the_next_leader_wins");
    let ttl = h.short_ttl();
    let ea = Election::new(a.lock(), name.as_str())
        .expect("election")
        .with_ttl(ttl);
    let eb = Election::new(b.lock(), name.as_str())
        .expect("election")
        .with_ttl(LONG_TTL);
    let la = ea
        .campaign_for("a", Duration::from_secs(5))
        .await
        .expect("a leads");
    a.crash();
    let bound = ttl + h.expiry_slack() + Duration::from_secs(5);
    let lb = eb.campaign_for("b", bound).await.expect("b takes over");
    let won_at = Instant::now();
    // the crashed leader's last lease stopped being valid before b could lead …
    let a_valid_until = la.guard().lease().valid_until();
    assert!(
        a_valid_until <= won_at,
        "a's leadership was still valid {:?} after b won",
        a_valid_until - won_at
    );
    // … and its guard reports the loss (it fires at valid_until)
    tokio::time::timeout(Duration::from_secs(5), la.lost())
        .await
        .expect("the crashed leader learns it lost");
    assert!(!la.is_leader());
    assert!(lb.epoch() > la.epoch());
    assert!(lb.resign().await.expect("resign"));
}

/// A campaign with a value the backend cannot store is refused with a typed error,
/// never a panic.
pub async fn campaign_refuses_bad_values(h: &impl Harness) {
    let a = h.client().await;
    let name = unique("campaign_refuses_bad_values");
    let e = Election::new(a.lock(), name.as_str()).expect("election");
    for bad in ["", "line\nbreak"] {
        let r = e.campaign_for(bad, Duration::from_millis(100)).await;
        assert!(
            matches!(r, Err(LockError::InvalidArgument(_))),
            "{bad:?}: {r:?}"
        );
    }
    assert!(e.leader().await.expect("leader").is_none());
}
