//! A simulated network path for backends that have none (in-process, embedded).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::retry_transient;
use dlock_core::{
    Capabilities, Coordination, DistributedLock, DistributedRwLock, DistributedSemaphore,
    HolderValue, Holding, Lease, LockError, LockInfo, LockName,
};

use crate::{Link, TestClient};

/// Wraps `lock` behind a switch: while cut, every call fails with
/// [`LockError::Unavailable`], as a client whose server vanished would (and `acquire`
/// keeps trying within its wait, as the trait's rule says). For backends
/// without a network path (MemoryLock, SQLite), where a [`crate::FaultProxy`] cannot
/// sit in between; network backends use the proxy instead.
#[must_use]
pub fn switched_client(lock: Arc<dyn Coordination>) -> (TestClient, Box<dyn Link>) {
    let cut = Arc::new(AtomicBool::new(false));
    let client = Switched {
        inner: lock,
        cut: Arc::clone(&cut),
    };
    (TestClient::new(Arc::new(client)), Box::new(Switch(cut)))
}

struct Switched {
    inner: Arc<dyn Coordination>,
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
    /// An in-process lock wakes its waiters without a call the switch could see.
    fn requests(&self) -> Option<u64> {
        None
    }
}

impl Switched {
    fn check(&self) -> Result<(), LockError> {
        if self.cut.load(Ordering::SeqCst) {
            Err(LockError::Unavailable {
                message: "link cut (test switch)".into(),
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
        // as a backend would: an outage during the wait is retried within it
        retry_transient(name, wait, |left| async move {
            self.check()?;
            self.inner.acquire(name, ttl, left).await
        })
        .await
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
    async fn try_acquire_with_value(
        &self,
        name: &LockName,
        ttl: Duration,
        value: &HolderValue,
    ) -> Result<Option<Lease>, LockError> {
        self.check()?;
        self.inner.try_acquire_with_value(name, ttl, value).await
    }
    async fn acquire_with_value(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
        value: &HolderValue,
    ) -> Result<Lease, LockError> {
        self.check()?;
        self.inner.acquire_with_value(name, ttl, wait, value).await
    }
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        self.check()?;
        self.inner.release_after(lease, linger).await
    }
    async fn holder_changed(
        &self,
        name: &LockName,
        seen: Option<&LockInfo>,
        until: tokio::time::Instant,
    ) -> Result<(), LockError> {
        self.check()?;
        self.inner.holder_changed(name, seen, until).await
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn backend_name(&self) -> &'static str {
        self.inner.backend_name()
    }
}

#[async_trait]
impl DistributedSemaphore for Switched {
    async fn try_acquire_permit(
        &self,
        name: &LockName,
        permits: u32,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        self.check()?;
        self.inner.try_acquire_permit(name, permits, ttl).await
    }
    async fn acquire_permit(
        &self,
        name: &LockName,
        permits: u32,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        retry_transient(name, wait, |left| async move {
            self.check()?;
            self.inner.acquire_permit(name, permits, ttl, left).await
        })
        .await
    }
    async fn permit_holders(&self, name: &LockName) -> Result<Vec<Holding>, LockError> {
        self.check()?;
        self.inner.permit_holders(name).await
    }
}

#[async_trait]
impl DistributedRwLock for Switched {
    async fn try_read(&self, name: &LockName, ttl: Duration) -> Result<Option<Lease>, LockError> {
        self.check()?;
        self.inner.try_read(name, ttl).await
    }
    async fn read(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        retry_transient(name, wait, |left| async move {
            self.check()?;
            self.inner.read(name, ttl, left).await
        })
        .await
    }
    async fn try_write(&self, name: &LockName, ttl: Duration) -> Result<Option<Lease>, LockError> {
        self.check()?;
        self.inner.try_write(name, ttl).await
    }
    async fn write(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        retry_transient(name, wait, |left| async move {
            self.check()?;
            self.inner.write(name, ttl, left).await
        })
        .await
    }
    async fn rw_holders(&self, name: &LockName) -> Result<Vec<Holding>, LockError> {
        self.check()?;
        self.inner.rw_holders(name).await
    }
}
