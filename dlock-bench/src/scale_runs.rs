//! The scale scenario's figures: each measurement of `scale` at each size, labelled.

use std::sync::Arc;

use dlock_any::{DistributedLock, LockError};

use crate::report::{Figure, Options};
use crate::scale::{self, HELD, WAITERS};
use crate::scenarios::{self, RequestCounter};

/// Runs the scale scenario's three parts up to `args`' sizes.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub(crate) async fn scale(
    url: &str,
    lock: &Arc<dyn DistributedLock>,
    args: &Options,
    counter: Option<&dyn RequestCounter>,
) -> Result<Vec<Figure>, LockError> {
    let mut figures = Vec::new();
    let mut push = |metric: &'static str, value: Option<f64>| {
        if let Some(v) = value {
            figures.push(Figure {
                scenario: "scale",
                metric,
                dlock: v,
                floor: None,
            });
        }
    };
    for n in WAITERS.into_iter().filter(|n| *n <= args.scale_waiters) {
        let w = scale::waiters(url, n, args.clients, counter).await?;
        let [handoff, requests, idle] = waiter_labels(n);
        push(handoff, Some(w.handoff_ms));
        push(requests, w.requests_per_handoff);
        push(idle, w.idle_requests_per_waiter_s);
    }
    for n in HELD.into_iter().filter(|n| *n <= args.scale_held) {
        let h = scenarios::held(Arc::clone(lock), n, args.held_ttl, counter).await?;
        let [requests, rss, cpu] = held_labels(n);
        push(requests, h.server_requests_per_s);
        push(rss, Some(h.rss_bytes_per_lock));
        push(cpu, Some(h.cpu_percent));
    }
    if args.scale_names > 0 {
        let n = scale::names(Arc::clone(lock), url, args.scale_names).await?;
        push("names records/1000", n.records_per_1000);
        push("names bytes/name", n.bytes_per_name);
        push("names cycles/s", Some(n.cycles_per_s));
    }
    Ok(figures)
}

fn waiter_labels(n: usize) -> [&'static str; 3] {
    match n {
        1 => [
            "waiters=1 hand-off ms",
            "waiters=1 req/hand-off",
            "waiters=1 idle req/s/waiter",
        ],
        10 => [
            "waiters=10 hand-off ms",
            "waiters=10 req/hand-off",
            "waiters=10 idle req/s/waiter",
        ],
        100 => [
            "waiters=100 hand-off ms",
            "waiters=100 req/hand-off",
            "waiters=100 idle req/s/waiter",
        ],
        _ => [
            "waiters=1000 hand-off ms",
            "waiters=1000 req/hand-off",
            "waiters=1000 idle req/s/waiter",
        ],
    }
}

fn held_labels(n: usize) -> [&'static str; 3] {
    match n {
        1_000 => [
            "held=1000 server req/s",
            "held=1000 RSS bytes/lock",
            "held=1000 CPU %",
        ],
        10_000 => [
            "held=10000 server req/s",
            "held=10000 RSS bytes/lock",
            "held=10000 CPU %",
        ],
        _ => [
            "held=100000 server req/s",
            "held=100000 RSS bytes/lock",
            "held=100000 CPU %",
        ],
    }
}
