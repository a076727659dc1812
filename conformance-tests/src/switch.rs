//! A simulated network path for backends that have none (in-process, embedded).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use dlock_core::backend::retry_transient;
use dlock_core::{Acquisition, Delegating, DistributedLock, Lease, LockError, waited};

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
    TestClient::behind(Switch(cut), Arc::new(client))
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

impl Delegating for Switched {
    type Inner = dyn DistributedLock;

    fn delegate(&self) -> &(dyn DistributedLock + 'static) {
        &*self.inner
    }

    fn reach(&self) -> Result<&(dyn DistributedLock + 'static), LockError> {
        self.check()?;
        Ok(&*self.inner)
    }
}

// Every call fails while the switch is cut; a waiting acquisition keeps trying.
dlock_core::delegate_lock! {
    impl [] for Switched;
    forward [renew, release, inspect, holders, release_after, holder_changed, hand_over,
        proclaim, resume, list, diagnose, break_holder, revoke_holder, capabilities,
        backend_name];
    {
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
    }
}
