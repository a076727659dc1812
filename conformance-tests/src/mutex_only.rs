//! A lock that offers only the mutex, for adapters that implement `DistributedLock`
//! themselves: the shared cases then check that it says so.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::{
    Access, Capabilities, DistributedLock, DistributedRwLock, DistributedSemaphore, HolderValue,
    Holding, Lease, LockError, LockInfo, LockName,
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
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        self.0.try_acquire(name, ttl).await
    }
    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        self.0.acquire(name, ttl, wait).await
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
    async fn try_acquire_with_value(
        &self,
        name: &LockName,
        ttl: Duration,
        value: &HolderValue,
    ) -> Result<Option<Lease>, LockError> {
        self.0.try_acquire_with_value(name, ttl, value).await
    }
    async fn acquire_with_value(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
        value: &HolderValue,
    ) -> Result<Lease, LockError> {
        self.0.acquire_with_value(name, ttl, wait, value).await
    }
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        self.0.release_after(lease, linger).await
    }
    async fn holder_changed(
        &self,
        name: &LockName,
        seen: Option<&LockInfo>,
        until: tokio::time::Instant,
    ) -> Result<(), LockError> {
        self.0.holder_changed(name, seen, until).await
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities().with_shared(false)
    }
    fn backend_name(&self) -> &'static str {
        self.0.backend_name()
    }
}

#[async_trait]
impl DistributedSemaphore for MutexOnly {
    async fn try_acquire_permit(
        &self,
        _: &LockName,
        permits: u32,
        _: Duration,
    ) -> Result<Option<Lease>, LockError> {
        self.unsupported(Access::Permit(permits))
    }
    async fn acquire_permit(
        &self,
        _: &LockName,
        permits: u32,
        _: Duration,
        _: Duration,
    ) -> Result<Lease, LockError> {
        self.unsupported(Access::Permit(permits))
    }
    async fn permit_holders(&self, _: &LockName) -> Result<Vec<Holding>, LockError> {
        self.unsupported(Access::Permit(1))
    }
}

#[async_trait]
impl DistributedRwLock for MutexOnly {
    async fn try_read(&self, _: &LockName, _: Duration) -> Result<Option<Lease>, LockError> {
        self.unsupported(Access::Read)
    }
    async fn read(&self, _: &LockName, _: Duration, _: Duration) -> Result<Lease, LockError> {
        self.unsupported(Access::Read)
    }
    async fn try_write(&self, _: &LockName, _: Duration) -> Result<Option<Lease>, LockError> {
        self.unsupported(Access::Write)
    }
    async fn write(&self, _: &LockName, _: Duration, _: Duration) -> Result<Lease, LockError> {
        self.unsupported(Access::Write)
    }
    async fn rw_holders(&self, _: &LockName) -> Result<Vec<Holding>, LockError> {
        self.unsupported(Access::Read)
    }
}
