//! What to do when the lock service is down: a decorator, opt-in and loud.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::{
    Access, Capabilities, Coordination, DistributedLock, DistributedRwLock, DistributedSemaphore,
    FencingToken, HolderValue, Holding, Lease, LockError, LockInfo, LockName, MemoryLock, OwnerId,
};

/// What [`FallbackLock`] does when an acquisition fails with
/// [`LockError::Unavailable`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fallback {
    /// Return the error (the default, and what every backend does on its own).
    #[default]
    FailFast,
    /// Take an in-process lock instead: exclusion among this process's callers only,
    /// right for a single-instance deployment. Its leases say so
    /// ([`Lease::fallback`]), and their tokens restart from 1 (a fenced store that saw
    /// real tokens refuses them).
    Local,
    /// Hand out a lease that excludes nobody: the caller relies on its work being
    /// idempotent. Its leases say so ([`Lease::fallback`]) and carry token 0, which
    /// every fenced store refuses.
    Proceed,
}

impl Fallback {
    /// The name used in URLs (`fallback=`), logs and metrics.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FailFast => "fail-fast",
            Self::Local => "local",
            Self::Proceed => "proceed",
        }
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Fallback {
    type Err = LockError;

    fn from_str(s: &str) -> Result<Self, LockError> {
        match s {
            "fail-fast" | "failfast" => Ok(Self::FailFast),
            "local" => Ok(Self::Local),
            "proceed" => Ok(Self::Proceed),
            other => Err(LockError::Config(format!(
                "fallback={other:?}: use fail-fast, local or proceed"
            ))),
        }
    }
}

/// Counter: acquisitions served by a fallback, by `policy` = `local` | `proceed`.
pub const FALLBACK_TOTAL: &str = "dlock_fallback_total";

/// A backend with a [`Fallback`] for outages: while acquisitions fail with
/// [`LockError::Unavailable`], they are served by the fallback — with a warning and a
/// [`FALLBACK_TOTAL`] count on every use. Everything else (renewals of real leases,
/// `inspect`, other errors) passes through unchanged.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use dlock_core::{DistributedLock, Fallback, FallbackLock, LockName, MemoryLock};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_core::LockError> {
/// let lock = FallbackLock::new(Arc::new(MemoryLock::new()), Fallback::Local);
/// let lease = lock.acquire(&LockName::new("job")?, Duration::from_secs(5), Duration::ZERO).await?;
/// assert_eq!(lease.fallback(), None); // the backend answered: a real lease
/// # Ok(()) }
/// ```
pub struct FallbackLock {
    connected: OnceCell<Arc<dyn Coordination>>,
    connect: Option<Connector>,
    next_attempt: Mutex<Instant>,
    policy: Fallback,
    local: MemoryLock,
}

/// Connects to the lock service (see [`FallbackLock::connecting`]).
pub type Connector = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<Arc<dyn Coordination>, LockError>> + Send>>
        + Send
        + Sync,
>;

/// How often a [`FallbackLock`] that is not connected yet tries again.
const CONNECT_RETRY: Duration = Duration::from_secs(1);

impl FallbackLock {
    /// `inner` with `policy` for its outages.
    #[must_use]
    pub fn new(inner: Arc<dyn Coordination>, policy: Fallback) -> Self {
        Self {
            connected: OnceCell::new_with(Some(inner)),
            connect: None,
            next_attempt: Mutex::new(Instant::now()),
            policy,
            local: MemoryLock::new(),
        }
    }

    /// A lock service that could not be reached at start-up: `connect` is tried
    /// again on use, at most once a second, and acquisitions meanwhile are served by
    /// `policy` — so a service can start during an outage when its policy allows it.
    #[must_use]
    pub fn connecting(connect: Connector, policy: Fallback) -> Self {
        Self {
            connected: OnceCell::new(),
            connect: Some(connect),
            next_attempt: Mutex::new(Instant::now()),
            policy,
            local: MemoryLock::new(),
        }
    }

    fn connected(&self) -> Option<&Arc<dyn Coordination>> {
        self.connected.get()
    }

    /// The lock service, connecting first if needed.
    async fn inner(&self) -> Result<&Arc<dyn Coordination>, LockError> {
        if let Some(inner) = self.connected.get() {
            return Ok(inner);
        }
        let Some(connect) = &self.connect else {
            return Err(LockError::transient("not connected"));
        };
        {
            let mut next = self
                .next_attempt
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            if now < *next {
                return Err(LockError::transient(
                    "the lock service could not be reached yet",
                ));
            }
            *next = now + CONNECT_RETRY;
        }
        let inner = connect().await?;
        Ok(self.connected.get_or_init(|| async { inner }).await)
    }

    /// The policy.
    #[must_use]
    pub fn policy(&self) -> Fallback {
        self.policy
    }

    /// `r`, or — when it is an outage and the policy says so — the fallback's lease.
    async fn or_fallback<T, L>(
        &self,
        name: &LockName,
        ttl: Duration,
        r: Result<T, LockError>,
        local: L,
        proceed: impl FnOnce(Lease) -> T + Send,
    ) -> Result<T, LockError>
    where
        L: Future<Output = Result<T, LockError>> + Send,
        T: Send,
    {
        let error = match r {
            Err(e @ LockError::Unavailable { .. }) => e,
            other => return other,
        };
        if self.policy == Fallback::FailFast {
            return Err(error);
        }
        tracing::warn!(
            lock = %name,
            backend = self.backend_name(),
            fallback = %self.policy,
            %error,
            "lock service unavailable: serving the acquisition from the fallback, not from the lock service"
        );
        metrics::counter!(
            FALLBACK_TOTAL,
            "backend" => self.backend_name(),
            "policy" => self.policy.as_str()
        )
        .increment(1);
        match self.policy {
            Fallback::Local => local.await,
            _ => {
                let lease = Lease::new(
                    name.clone(),
                    OwnerId::random()?,
                    FencingToken::new(0),
                    ttl,
                    Instant::now(),
                )
                .with_fallback(Fallback::Proceed);
                Ok(proceed(lease))
            }
        }
    }
}

fn local(lease: Lease) -> Lease {
    lease.with_fallback(Fallback::Local)
}

#[async_trait]
impl DistributedLock for FallbackLock {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        let r = async { self.inner().await?.try_acquire(name, ttl).await }.await;
        let local = async { Ok(self.local.try_acquire(name, ttl).await?.map(local)) };
        self.or_fallback(name, ttl, r, local, Some).await
    }

    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        let r = async { self.inner().await?.acquire(name, ttl, wait).await }.await;
        let local = async { self.local.acquire(name, ttl, wait).await.map(local) };
        self.or_fallback(name, ttl, r, local, |l| l).await
    }

    async fn try_acquire_with_value(
        &self,
        name: &LockName,
        ttl: Duration,
        value: &HolderValue,
    ) -> Result<Option<Lease>, LockError> {
        let r = async {
            self.inner()
                .await?
                .try_acquire_with_value(name, ttl, value)
                .await
        }
        .await;
        let local = async {
            Ok(self
                .local
                .try_acquire_with_value(name, ttl, value)
                .await?
                .map(local))
        };
        self.or_fallback(name, ttl, r, local, Some).await
    }

    async fn acquire_with_value(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
        value: &HolderValue,
    ) -> Result<Lease, LockError> {
        let r = async {
            self.inner()
                .await?
                .acquire_with_value(name, ttl, wait, value)
                .await
        }
        .await;
        let local = async {
            self.local
                .acquire_with_value(name, ttl, wait, value)
                .await
                .map(local)
        };
        self.or_fallback(name, ttl, r, local, |l| l).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        match lease.fallback() {
            Some(Fallback::Local) => self.local.renew(lease).await,
            Some(_) => Ok(lease.renewed(lease.ttl(), Instant::now())),
            None => self.inner().await?.renew(lease).await,
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        match lease.fallback() {
            Some(Fallback::Local) => self.local.release(lease).await,
            Some(_) => Ok(true),
            None => self.inner().await?.release(lease).await,
        }
    }

    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        match lease.fallback() {
            Some(Fallback::Local) => self.local.release_after(lease, linger).await,
            Some(_) => Ok(true),
            None => self.inner().await?.release_after(lease, linger).await,
        }
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.inner().await?.inspect(name).await
    }

    async fn holder_changed(
        &self,
        name: &LockName,
        seen: Option<&LockInfo>,
        until: Instant,
    ) -> Result<(), LockError> {
        self.inner().await?.holder_changed(name, seen, until).await
    }

    fn capabilities(&self) -> Capabilities {
        self.connected()
            .map_or_else(Capabilities::per_lease, |i| i.capabilities())
    }

    fn backend_name(&self) -> &'static str {
        self.connected().map_or("unconnected", |i| i.backend_name())
    }
}

#[async_trait]
impl DistributedSemaphore for FallbackLock {
    async fn try_acquire_permit(
        &self,
        name: &LockName,
        permits: u32,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        let r = async {
            self.inner()
                .await?
                .try_acquire_permit(name, permits, ttl)
                .await
        }
        .await;
        let local = async {
            Ok(self
                .local
                .try_acquire_permit(name, permits, ttl)
                .await?
                .map(local))
        };
        let access = Access::Permit(permits);
        self.or_fallback(name, ttl, r, local, |l| Some(l.with_access(access)))
            .await
    }

    async fn acquire_permit(
        &self,
        name: &LockName,
        permits: u32,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        let r = async {
            self.inner()
                .await?
                .acquire_permit(name, permits, ttl, wait)
                .await
        }
        .await;
        let local = async {
            self.local
                .acquire_permit(name, permits, ttl, wait)
                .await
                .map(local)
        };
        let access = Access::Permit(permits);
        self.or_fallback(name, ttl, r, local, |l| l.with_access(access))
            .await
    }

    async fn permit_holders(&self, name: &LockName) -> Result<Vec<Holding>, LockError> {
        self.inner().await?.permit_holders(name).await
    }
}

#[async_trait]
impl DistributedRwLock for FallbackLock {
    async fn try_read(&self, name: &LockName, ttl: Duration) -> Result<Option<Lease>, LockError> {
        let r = async { self.inner().await?.try_read(name, ttl).await }.await;
        let local = async { Ok(self.local.try_read(name, ttl).await?.map(local)) };
        self.or_fallback(name, ttl, r, local, |l| Some(l.with_access(Access::Read)))
            .await
    }

    async fn read(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        let r = async { self.inner().await?.read(name, ttl, wait).await }.await;
        let local = async { self.local.read(name, ttl, wait).await.map(local) };
        self.or_fallback(name, ttl, r, local, |l| l.with_access(Access::Read))
            .await
    }

    async fn try_write(&self, name: &LockName, ttl: Duration) -> Result<Option<Lease>, LockError> {
        let r = async { self.inner().await?.try_write(name, ttl).await }.await;
        let local = async { Ok(self.local.try_write(name, ttl).await?.map(local)) };
        self.or_fallback(name, ttl, r, local, |l| Some(l.with_access(Access::Write)))
            .await
    }

    async fn write(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        let r = async { self.inner().await?.write(name, ttl, wait).await }.await;
        let local = async { self.local.write(name, ttl, wait).await.map(local) };
        self.or_fallback(name, ttl, r, local, |l| l.with_access(Access::Write))
            .await
    }

    async fn rw_holders(&self, name: &LockName) -> Result<Vec<Holding>, LockError> {
        self.inner().await?.rw_holders(name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        for p in [Fallback::FailFast, Fallback::Local, Fallback::Proceed] {
            assert_eq!(p.as_str().parse::<Fallback>().unwrap(), p);
        }
        assert!(matches!(
            "maybe".parse::<Fallback>(),
            Err(LockError::Config(_))
        ));
    }
}
