//! MemoryLock, the reference backend, passes the whole suite.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dlock_conformance::{Harness, Link, TestClient};
use dlock_core::{
    Capabilities, DistributedLock, Lease, LockError, LockInfo, LockName, MemoryLock, async_trait,
};

struct Memory {
    table: MemoryLock,
}

/// A client of the shared table behind a switch, standing in for a network path.
struct Switched {
    inner: MemoryLock,
    cut: Arc<AtomicBool>,
}

struct Switch(Arc<AtomicBool>);

#[async_trait]
impl Link for Switch {
    async fn cut(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    async fn heal(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Switched {
    fn check(&self) -> Result<(), LockError> {
        if self.cut.load(Ordering::SeqCst) {
            Err(LockError::Unavailable {
                message: "link cut".into(),
                source: None,
            })
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl DistributedLock for Switched {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        self.check()?;
        self.inner.try_acquire(name, ttl).await
    }
    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        self.check()?;
        self.inner.acquire(name, ttl, wait).await
    }
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.check()?;
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.check()?;
        self.inner.release(lease).await
    }
    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.check()?;
        self.inner.inspect(name).await
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}

#[async_trait]
impl Harness for Memory {
    async fn client(&self) -> TestClient {
        TestClient::new(Arc::new(self.table.clone()))
    }

    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        let cut = Arc::new(AtomicBool::new(false));
        let client = Switched {
            inner: self.table.clone(),
            cut: Arc::clone(&cut),
        };
        (TestClient::new(Arc::new(client)), Box::new(Switch(cut)))
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
