//! The counter workload: many clients, one lock, one shared value.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{LONG_TTL, assert_fresh, unique};
use crate::{FencedCounter, Harness, TestClient};

/// Runs a workload: each of the harness's workload clients, side by side (all connected
/// first), makes its iterations of `cycle` one after another; returns when all are
/// done (a panic in one fails the case).
pub(crate) async fn on_every_client<F, Fut>(h: &impl Harness, cycle: F)
where
    F: Fn(TestClient) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (clients, iterations) = h.workload();
    // every client connected before any starts: a client that takes long to connect
    // (a pooler under load) would otherwise find the others done, and nothing contended
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        connected.push(h.client().await);
    }
    let cycle = Arc::new(cycle);
    let mut tasks = Vec::new();
    for c in connected {
        let cycle = Arc::clone(&cycle);
        tasks.push(tokio::spawn(async move {
            for _ in 0..iterations {
                cycle(c.clone()).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("workload task");
    }
}

/// N clients × M iterations read-modify-write a shared value under the lock. No two
/// critical sections may overlap, every write's token must pass the fence (tokens only
/// increase), and no increment may be lost.
pub async fn counter_workload(h: &impl Harness) {
    let (clients, iterations) = h.workload();
    let name = unique("counter_workload");
    let counter = Arc::new(FencedCounter::default());
    let shared = Arc::clone(&counter);
    on_every_client(h, move |c| {
        let (name, counter) = (name.clone(), Arc::clone(&shared));
        async move {
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
    })
    .await;
    assert_eq!(counter.overlaps(), 0, "critical sections overlapped");
    assert_eq!(counter.rejected(), 0, "tokens went backwards");
    assert_eq!(
        counter.value(),
        (clients * iterations) as u64,
        "increments were lost"
    );
}
