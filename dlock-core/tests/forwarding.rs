//! Every wrapper forwards every method of the trait. A provided method a wrapper leaves
//! out answers with its default instead of the backend's answer — a silent drift this
//! test catches: a probe backend answers each method in a way no default does, and
//! every wrapper must pass the answers through. (madelson's DistributedLock keeps a
//! test of the same kind over its derived methods.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::{
    Access, Acquisition, Capabilities, DistributedLock, Fallback, FallbackLock, Finding, Held,
    HolderValue, HolderWatch, Holding, Instrumented, Lease, LockError, LockInfo, LockName,
    MemoryLock, SharedLock, Ticket, async_trait,
};

/// A backend whose every answer is recognisable, counting the calls that return
/// nothing distinctive.
struct Probe {
    inner: MemoryLock,
    calls: AtomicUsize,
}

#[async_trait]
impl DistributedLock for Probe {
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        self.inner.acquire_with(request).await
    }
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
    async fn release_after(&self, lease: &Lease, _linger: Duration) -> Result<bool, LockError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.release(lease).await
    }
    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.inner.inspect(name).await
    }
    async fn holders(&self, _: &LockName, _: Access) -> Result<Vec<Holding>, LockError> {
        Ok(Vec::new())
    }
    async fn holder_changed(&self, _: &HolderWatch<'_>) -> Result<(), LockError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn hand_over(&self, lease: &Lease) -> Result<Ticket, LockError> {
        Err(LockError::lease_lost(lease.name()))
    }
    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        Err(LockError::lease_lost(ticket.name()))
    }
    async fn proclaim(&self, lease: &Lease, _: &HolderValue) -> Result<(), LockError> {
        Err(LockError::lease_lost(lease.name()))
    }
    async fn list(&self, _: &str) -> Result<Vec<Held>, LockError> {
        Ok(Vec::new())
    }
    async fn diagnose(&self) -> Result<Vec<Finding>, LockError> {
        Ok(vec![Finding::info("probe", "answered")])
    }
    async fn break_holder(&self, _: &LockName) -> Result<Option<LockInfo>, LockError> {
        Ok(None)
    }
    async fn revoke_holder(&self, _: &LockName) -> Result<Option<LockInfo>, LockError> {
        Ok(None)
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::per_lease().with_shared(true)
    }
    fn backend_name(&self) -> &'static str {
        "probe"
    }
}

/// The wrappers, each over its own probe: `(label, wrapper, probe)`.
fn wrapped() -> Vec<(&'static str, Arc<dyn DistributedLock>, Arc<Probe>)> {
    let probe = || {
        Arc::new(Probe {
            inner: MemoryLock::new(),
            calls: AtomicUsize::new(0),
        })
    };
    let mut all: Vec<(&'static str, Arc<dyn DistributedLock>, Arc<Probe>)> = Vec::new();
    let p = probe();
    all.push(("Arc", Arc::new(Arc::clone(&p)), p));
    let p = probe();
    all.push((
        "Instrumented",
        Arc::new(Instrumented::new(Arc::clone(&p))),
        p,
    ));
    let p = probe();
    all.push((
        "FallbackLock",
        Arc::new(FallbackLock::new(p.clone(), Fallback::Local)),
        p,
    ));
    let p = probe();
    all.push(("SharedLock", Arc::new(SharedLock::writes(p.clone())), p));
    all
}

#[tokio::test]
async fn wrappers_forward_every_method() {
    let name = LockName::new("forwarding/probe").unwrap();
    let ttl = Duration::from_secs(5);
    for (label, lock, probe) in wrapped() {
        assert_eq!(lock.backend_name(), "probe", "{label}: backend_name");
        assert!(lock.capabilities().shared, "{label}: capabilities");
        assert!(lock.list("").await.is_ok(), "{label}: list");
        assert!(
            lock.holders(&name, Access::Read).await.is_ok(),
            "{label}: holders"
        );
        assert_eq!(lock.diagnose().await.unwrap().len(), 1, "{label}: diagnose");
        // a view answers for one side of the name, whose mutex it must not break
        assert_eq!(
            lock.break_holder(&name).await.is_ok(),
            label != "SharedLock",
            "{label}: break_holder"
        );
        assert_eq!(
            lock.revoke_holder(&name).await.is_ok(),
            label != "SharedLock",
            "{label}: revoke_holder"
        );
        let lease = lock.try_acquire(&name, ttl).await.unwrap().unwrap();
        // a ticket for a mutex lease on the probe (a view's leases take none)
        let other = LockName::new("forwarding/ticket").unwrap();
        let plain = probe.inner.try_acquire(&other, ttl).await.unwrap().unwrap();
        let ticket = Ticket::of("probe", &plain).unwrap();
        assert!(
            matches!(lock.resume(&ticket).await, Err(LockError::LeaseLost { .. })),
            "{label}: resume"
        );
        // the default writes a ticket; the probe refuses, and so must every wrapper
        assert!(
            matches!(
                lock.hand_over(&plain).await,
                Err(LockError::LeaseLost { .. })
            ),
            "{label}: hand_over"
        );
        // the default refuses as unsupported; the probe answers lost, and so must
        // every wrapper
        let value = HolderValue::new("10.0.0.9:80").unwrap();
        assert!(
            matches!(
                lock.proclaim(&plain, &value).await,
                Err(LockError::LeaseLost { .. })
            ),
            "{label}: proclaim"
        );
        let before = probe.calls.load(Ordering::SeqCst);
        let watch = HolderWatch::new(&name, None, tokio::time::Instant::now());
        lock.holder_changed(&watch).await.unwrap();
        // a view over one side polls on purpose: the backend's watches follow the
        // mutex's holder, not the side's
        let watched = usize::from(label != "SharedLock");
        assert_eq!(
            probe.calls.load(Ordering::SeqCst),
            before + watched,
            "{label}: holder_changed"
        );
        lock.release_after(&lease, Duration::from_millis(50))
            .await
            .unwrap();
        assert_eq!(
            probe.calls.load(Ordering::SeqCst),
            before + watched + 1,
            "{label}: release_after"
        );
    }
}
