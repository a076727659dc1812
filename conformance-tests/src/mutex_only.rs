//! A lock that offers only the mutex, for adapters that implement `DistributedLock`
//! themselves: the shared cases then check that it says so.

use std::sync::Arc;

use dlock_core::{
    Access, Acquisition, Capabilities, Delegating, DistributedLock, Holding, Lease, LockError,
    LockName,
};

/// `lock` with semaphores and read-write locks answered `Unsupported`.
pub(crate) struct MutexOnly(pub Arc<dyn DistributedLock>);

impl MutexOnly {
    fn unsupported<T>(&self, access: Access) -> Result<T, LockError> {
        Err(LockError::unsupported(self.0.backend_name(), access))
    }
}

impl Delegating for MutexOnly {
    type Inner = dyn DistributedLock;

    fn delegate(&self) -> &(dyn DistributedLock + 'static) {
        &*self.0
    }
}

dlock_core::delegate_lock! {
    impl [] for MutexOnly;
    forward [renew, release, inspect, release_after, holder_changed, hand_over, proclaim,
        resume, list, diagnose, break_holder, revoke_holder, backend_name];
    {
        async fn acquire_with(
            &self,
            request: &Acquisition<'_>,
        ) -> Result<Option<Lease>, LockError> {
            match request.access() {
                Access::Exclusive => self.0.acquire_with(request).await,
                other => self.unsupported(other),
            }
        }
        async fn holders(&self, _: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
            self.unsupported(of)
        }
        fn capabilities(&self) -> Capabilities {
            self.0.capabilities().with_shared(false)
        }
    }
}
