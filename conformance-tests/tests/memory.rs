//! MemoryLock, the reference backend, passes the whole suite, its semaphores and
//! read-write locks included.

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{Harness, Link, TestClient, switched_client};
use dlock_core::{MemoryLock, async_trait};

struct Memory {
    table: MemoryLock,
}

#[async_trait]
impl Harness for Memory {
    async fn client(&self) -> TestClient {
        TestClient::new(Arc::new(self.table.clone()))
    }

    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        switched_client(Arc::new(self.table.clone()))
    }

    fn short_ttl(&self) -> Duration {
        Duration::from_millis(300)
    }

    fn expiry_slack(&self) -> Duration {
        Duration::from_millis(50)
    }

    fn workload(&self) -> (usize, usize) {
        (8, 100)
    }
}

async fn harness() -> Memory {
    Memory {
        table: MemoryLock::new(),
    }
}

dlock_conformance::conformance_suite!(harness);
dlock_conformance::shared_as_mutex_suite!(harness);
