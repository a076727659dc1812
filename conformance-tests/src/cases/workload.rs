//! The counter workload: many clients, one lock, one shared value.

use std::sync::Arc;
use std::time::Duration;

use super::{LONG_TTL, assert_fresh, unique};
use crate::{FencedCounter, Harness};

/// N clients × M iterations read-modify-write a shared value under the lock. No two
/// critical sections may overlap, every write's token must pass the fence (tokens only
/// increase), and no increment may be lost.
pub async fn counter_workload(h: &impl Harness) {
    let (clients, iterations) = h.workload();
    let name = unique("counter_workload");
    let counter = Arc::new(FencedCounter::default());
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let c = h.client().await;
        let (name, counter) = (name.clone(), Arc::clone(&counter));
        tasks.push(tokio::spawn(async move {
            for _ in 0..iterations {
                let lease = c
                    .acquire(&name, LONG_TTL, Duration::from_secs(120))
                    .await
                    .expect("acquire in workload");
                assert_fresh(&lease);
                counter.enter();
                let v = counter.value();
                tokio::task::yield_now().await;
                assert!(
                    counter.write(lease.token(), v + 1),
                    "fence rejected a holder's write"
                );
                counter.leave();
                assert!(c.release(&lease).await.expect("release in workload"));
            }
        }));
    }
    for t in tasks {
        t.await.expect("workload task");
    }
    assert_eq!(counter.overlaps(), 0, "critical sections overlapped");
    assert_eq!(counter.rejected(), 0, "tokens went backwards");
    assert_eq!(
        counter.value(),
        (clients * iterations) as u64,
        "increments were lost"
    );
}
