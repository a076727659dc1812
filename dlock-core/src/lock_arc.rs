//! `Arc<T>` is a `DistributedLock` when `T` is: every method forwarded.

use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Access, Acquisition, Capabilities, DistributedLock, Finding, Held, HolderWatch, Holding, Lease,
    LockError, LockInfo, LockName, Ticket,
};

/// A shared backend is a backend, so `Instrumented<Arc<dyn DistributedLock>>` works.
/// Every method forwards: a provided one left out would answer with its default
/// (the conformance suite's `wrappers_forward_every_method` checks the set).
#[async_trait]
impl<T: DistributedLock + ?Sized> DistributedLock for std::sync::Arc<T> {
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        (**self).acquire_with(request).await
    }
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        (**self).renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        (**self).release(lease).await
    }
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        (**self).release_after(lease, linger).await
    }
    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        (**self).inspect(name).await
    }
    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        (**self).holders(name, of).await
    }
    async fn holder_changed(&self, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        (**self).holder_changed(watch).await
    }
    async fn hand_over(&self, lease: &Lease) -> Result<Ticket, LockError> {
        (**self).hand_over(lease).await
    }
    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        (**self).resume(ticket).await
    }
    async fn proclaim(&self, lease: &Lease, value: &crate::HolderValue) -> Result<(), LockError> {
        (**self).proclaim(lease, value).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        (**self).list(prefix).await
    }
    async fn diagnose(&self) -> Result<Vec<Finding>, LockError> {
        (**self).diagnose().await
    }
    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        (**self).break_holder(name).await
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn backend_name(&self) -> &'static str {
        (**self).backend_name()
    }
}
