//! An adapter that implements only `DistributedLock` (here MemoryLock seen through
//! `TestClient::mutex_only`): the mutex cases pass, and every shared case checks that
//! semaphores and read-write locks are refused with `Unsupported`.

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{Harness, Link, TestClient, switched_client};
use dlock_core::{MemoryLock, async_trait};

struct MutexOnly {
    table: MemoryLock,
}

#[async_trait]
impl Harness for MutexOnly {
    async fn client(&self) -> TestClient {
        TestClient::mutex_only(Arc::new(self.table.clone()))
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
}

async fn harness() -> MutexOnly {
    MutexOnly {
        table: MemoryLock::new(),
    }
}

dlock_conformance::conformance_suite!(harness);
