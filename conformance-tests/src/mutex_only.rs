//! A lock that offers only the mutex, for adapters that implement `DistributedLock`
//! themselves: the shared cases then check that it says so.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::{
    Access, Acquisition, Capabilities, DistributedLock, Finding, Held, HolderWatch, Holding, Lease,
    LockError, LockInfo, LockName, Ticket,
};

/// `lock` with semaphores and read-write locks answered `Unsupported`.
pub(crate) struct MutexOnly(pub Arc<dyn DistributedLock>);

impl MutexOnly {
    fn unsupported<T>(&self, access: Access) -> Result<T, LockError> {
        Err(LockError::unsupported(self.0.backend_name(), access))
    }
}

#[async_trait]
impl DistributedLock for MutexOnly {
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        match request.access() {
            Access::Exclusive => self.0.acquire_with(request).await,
            other => self.unsupported(other),
        }
    }
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.0.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.0.release(lease).await
    }
    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.0.inspect(name).await
    }
    async fn holders(&self, _: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        self.unsupported(of)
    }
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        self.0.release_after(lease, linger).await
    }
    async fn holder_changed(&self, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        self.0.holder_changed(watch).await
    }
    async fn hand_over(&self, lease: &Lease) -> Result<Ticket, LockError> {
        self.0.hand_over(lease).await
    }
    async fn proclaim(
        &self,
        lease: &Lease,
        value: &dlock_core::HolderValue,
    ) -> Result<(), LockError> {
        self.0.proclaim(lease, value).await
    }
    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        self.0.resume(ticket).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        self.0.list(prefix).await
    }
    async fn diagnose(&self) -> Result<Vec<Finding>, LockError> {
        self.0.diagnose().await
    }
    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.0.break_holder(name).await
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities().with_shared(false)
    }
    fn backend_name(&self) -> &'static str {
        self.0.backend_name()
    }
}
