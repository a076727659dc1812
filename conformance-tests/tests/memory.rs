//! MemoryLock, the reference backend, passes the whole suite, its semaphores and
//! read-write locks included. And seen as an adapter that implements only
//! `DistributedLock` (`TestClient::mutex_only`, in `mod mutex_only`): the mutex cases
//! pass, and every shared case checks that semaphores and read-write locks are refused
//! with `Unsupported`.

use std::sync::Arc;

use dlock_conformance::{Harness, Link, TestClient, Timings, switched_client};
use dlock_core::{MemoryLock, async_trait};

struct Memory {
    table: MemoryLock,
    /// Clients that offer the mutex only.
    mutex_only: bool,
}

#[async_trait]
impl Harness for Memory {
    async fn client(&self) -> TestClient {
        let lock = Arc::new(self.table.clone());
        if self.mutex_only {
            TestClient::mutex_only(lock)
        } else {
            TestClient::new(lock)
        }
    }

    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        switched_client(Arc::new(self.table.clone()))
    }

    fn timings(&self) -> Timings {
        Timings::millis(300, 50, 100)
    }
}

async fn harness() -> Memory {
    Memory {
        table: MemoryLock::new(),
        mutex_only: false,
    }
}

dlock_conformance::conformance_suite!(harness);
dlock_conformance::shared_as_mutex_suite!(harness);

mod mutex_only {
    use super::*;

    async fn harness() -> Memory {
        Memory {
            table: MemoryLock::new(),
            mutex_only: true,
        }
    }

    dlock_conformance::conformance_suite!(harness);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_on_memory() {
    use std::sync::Arc;
    let (lock, results) = (
        dlock_core::MemoryLock::new(),
        Arc::new(dlock_core::MemoryResults::new()),
    );
    let side = |l: &dlock_core::MemoryLock| -> dlock_conformance::idempotency::Side {
        (Arc::new(l.clone()), results.clone())
    };
    dlock_conformance::idempotency::idempotency_suite(
        side(&lock),
        side(&lock),
        std::time::Duration::from_millis(300),
    )
    .await;
}
