//! A simulated network path for backends that have none (in-process, embedded).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::retry_transient;
use dlock_core::{
    Access, Acquisition, Capabilities, DistributedLock, Finding, Held, HolderWatch, Holding, Lease,
    LockError, LockInfo, LockName, Ticket, waited,
};

use crate::{Link, TestClient};

/// Wraps `lock` behind a switch: while cut, every call fails with
/// [`LockError::Unavailable`], as a client whose server vanished would (and `acquire`
/// keeps trying within its wait, as the trait's rule says). For backends
/// without a network path (MemoryLock, SQLite), where a [`crate::FaultProxy`] cannot
/// sit in between; network backends use the proxy instead.
#[must_use]
pub fn switched_client(lock: Arc<dyn DistributedLock>) -> (TestClient, Box<dyn Link>) {
    let cut = Arc::new(AtomicBool::new(false));
    let client = Switched {
        inner: lock,
        cut: Arc::clone(&cut),
    };
    (TestClient::new(Arc::new(client)), Box::new(Switch(cut)))
}

struct Switched {
    inner: Arc<dyn DistributedLock>,
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
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        let Some(wait) = request.wait() else {
            self.check()?;
            return self.inner.acquire_with(request).await;
        };
        // as a backend would: an outage during the wait is retried within it
        let name = request.name();
        retry_transient(name, wait, |left| async move {
            self.check()?;
            waited(
                self.inner.acquire_with(&request.waiting(left)).await,
                name,
                left,
            )
        })
        .await
        .map(Some)
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
    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        self.check()?;
        self.inner.holders(name, of).await
    }
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        self.check()?;
        self.inner.release_after(lease, linger).await
    }
    async fn holder_changed(&self, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        self.check()?;
        self.inner.holder_changed(watch).await
    }
    async fn hand_over(&self, lease: &Lease) -> Result<Ticket, LockError> {
        self.check()?;
        self.inner.hand_over(lease).await
    }
    async fn proclaim(
        &self,
        lease: &Lease,
        value: &dlock_core::HolderValue,
    ) -> Result<(), LockError> {
        self.check()?;
        self.inner.proclaim(lease, value).await
    }
    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        self.check()?;
        self.inner.resume(ticket).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        self.check()?;
        self.inner.list(prefix).await
    }
    async fn diagnose(&self) -> Result<Vec<Finding>, LockError> {
        self.check()?;
        self.inner.diagnose().await
    }
    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.check()?;
        self.inner.break_holder(name).await
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn backend_name(&self) -> &'static str {
        self.inner.backend_name()
    }
}
