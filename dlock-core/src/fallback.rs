//! What to do when the lock service is down: a decorator, opt-in and loud.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OnceCell;
use tokio::time::Instant;

pub use crate::fallback_policy::Fallback;
use crate::{
    Access, Acquisition, Capabilities, Deadline, DistributedLock, FencingToken, HolderWatch,
    Holding, Lease, LockError, LockInfo, LockName, MemoryLock, OwnerId,
};

/// Counter: acquisitions served by a fallback, by `policy` = `local` | `proceed`.
pub const FALLBACK_TOTAL: &str = "dlock_fallback_total";

/// A backend with a [`Fallback`] for outages: while acquisitions fail with
/// [`LockError::Unavailable`], they are served by the fallback — with a warning and a
/// [`FALLBACK_TOTAL`] count on every use. Everything else (renewals of real leases,
/// `inspect`, other errors) passes through unchanged.
///
/// Under [`Fallback::Local`] every acquisition takes the in-process lock first, real or
/// not, so this process's callers exclude each other across an outage and its end: a
/// caller holding a fallback lease keeps out one that finds the service back.
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
    connected: OnceCell<Arc<dyn DistributedLock>>,
    connect: Option<Connector>,
    next_attempt: Mutex<Instant>,
    policy: Fallback,
    local: MemoryLock,
    /// Under `Local`: the in-process lease taken with each real one, by the real
    /// lease's owner id, renewed and released with it.
    companions: Mutex<HashMap<OwnerId, Lease>>,
}

/// Connects to the lock service (see [`FallbackLock::connecting`]).
pub type Connector = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<Arc<dyn DistributedLock>, LockError>> + Send>>
        + Send
        + Sync,
>;

/// How often a [`FallbackLock`] that is not connected yet tries again.
const CONNECT_RETRY: Duration = Duration::from_secs(1);

type Taken = Result<Option<Lease>, LockError>;

impl FallbackLock {
    /// `inner` with `policy` for its outages.
    #[must_use]
    pub fn new(inner: Arc<dyn DistributedLock>, policy: Fallback) -> Self {
        Self::with(OnceCell::new_with(Some(inner)), None, policy)
    }

    /// A lock service that could not be reached at start-up: `connect` is tried
    /// again on use, at most once a second, and acquisitions meanwhile are served by
    /// `policy` — so a service can start during an outage when its policy allows it.
    #[must_use]
    pub fn connecting(connect: Connector, policy: Fallback) -> Self {
        Self::with(OnceCell::new(), Some(connect), policy)
    }

    fn with(
        connected: OnceCell<Arc<dyn DistributedLock>>,
        connect: Option<Connector>,
        policy: Fallback,
    ) -> Self {
        Self {
            connected,
            connect,
            next_attempt: Mutex::new(Instant::now()),
            policy,
            local: MemoryLock::new(),
            companions: Mutex::new(HashMap::new()),
        }
    }

    /// The policy.
    #[must_use]
    pub fn policy(&self) -> Fallback {
        self.policy
    }

    fn connected(&self) -> Option<&Arc<dyn DistributedLock>> {
        self.connected.get()
    }

    /// The lock service, connecting first if needed.
    async fn inner(&self) -> Result<&Arc<dyn DistributedLock>, LockError> {
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

    fn companions(&self) -> std::sync::MutexGuard<'_, HashMap<OwnerId, Lease>> {
        self.companions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One acquisition as `request` asks: under `Local` the in-process lock first,
    /// then the service (`real`, given what is left of the wait); on an outage, the
    /// policy's lease.
    ///
    /// The in-process companion is held through the whole wait and the whole hold: it
    /// is taken for the TTL plus the wait, and cut back to the TTL from the moment the
    /// real lease is granted (then renewed with it). Taken for the TTL alone, it would
    /// expire while the real acquisition still waits, and another caller of this
    /// process could take it — and, in an outage, a fallback lease beside the real one.
    async fn take<R, RF>(&self, request: &Acquisition<'_>, real: R) -> Taken
    where
        R: FnOnce(Duration) -> RF + Send,
        RF: Future<Output = Taken> + Send,
    {
        let wait = request.wait().unwrap_or(Duration::ZERO);
        let deadline = Deadline::after(wait);
        let companion = if self.policy == Fallback::Local {
            let through_the_wait = (request.ttl() + wait).min(crate::MAX_TTL);
            let mut local = Acquisition::new(request.name(), through_the_wait)
                .with_access(request.access())
                .with_value(request.value());
            if request.wait().is_some() {
                local = local.waiting(deadline.remaining());
            }
            match self.local.acquire_with(&local).await? {
                Some(l) => Some(l),
                None if request.wait().is_some() => {
                    return Err(timed_out(request.name(), wait));
                }
                None => return Ok(None),
            }
        } else {
            None
        };
        // the companion from now on lasts as long as the lease it goes with
        let cut_back = |c: Lease| async move {
            let renewed = self
                .local
                .renew(&c.renewed(request.ttl(), Instant::now()))
                .await;
            renewed.unwrap_or(c)
        };
        let error = match real(deadline.remaining()).await {
            Ok(Some(lease)) => {
                if let Some(c) = companion {
                    let c = cut_back(c).await;
                    self.companions().insert(lease.owner().clone(), c);
                }
                return Ok(Some(lease));
            }
            Err(e @ LockError::Unavailable { .. }) if self.policy != Fallback::FailFast => e,
            other => {
                if let Some(c) = companion {
                    let _ = self.local.release(&c).await;
                }
                return other;
            }
        };
        tracing::warn!(
            lock = %request.name(),
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
        Ok(Some(match companion {
            Some(c) => local_lease(cut_back(c).await),
            None => Lease::new(
                request.name().clone(),
                OwnerId::random()?,
                FencingToken::new(0),
                request.ttl(),
                Instant::now(),
            )
            .with_access(request.access())
            .with_fallback(Fallback::Proceed),
        }))
    }

    /// The in-process lease a real one was taken with, if any.
    fn companion(&self, lease: &Lease) -> Option<Lease> {
        self.companions().get(lease.owner()).cloned()
    }

    fn drop_companion(&self, lease: &Lease) -> Option<Lease> {
        self.companions().remove(lease.owner())
    }
}

/// What `acquire` returns when `take` came back empty: only a local wait can.
fn timed_out(name: &LockName, wait: Duration) -> LockError {
    LockError::Timeout {
        name: name.to_string(),
        waited: wait,
    }
}

/// A fallback lease over an in-process one: token 0, which every fenced store refuses
/// (in-process tokens would collide with the service's own), marked
/// [`Fallback::Local`], the in-process lease inside for renewing and releasing.
fn local_lease(inner: Lease) -> Lease {
    let ttl = inner.ttl();
    let sent = inner
        .valid_until()
        .checked_sub(ttl.saturating_sub(crate::drift_margin(ttl)))
        .unwrap_or_else(Instant::now);
    Lease::new(
        inner.name().clone(),
        inner.owner().clone(),
        FencingToken::new(0),
        ttl,
        sent,
    )
    .with_access(inner.access())
    .with_fallback(Fallback::Local)
    .with_backend_data(Arc::new(inner))
}

/// The in-process lease inside a local fallback lease.
fn inside(lease: &Lease) -> Result<&Lease, LockError> {
    lease.renewable_data::<Lease>()
}

#[async_trait]
impl DistributedLock for FallbackLock {
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        // the same request for what is left of its wait, on either lock
        let within = |left: Duration| match request.wait() {
            None => *request,
            Some(_) => request.waiting(left),
        };
        let taken = self
            .take(request, |left| async move {
                self.inner().await?.acquire_with(&within(left)).await
            })
            .await?;
        match (taken, request.wait()) {
            (None, Some(wait)) => Err(timed_out(request.name(), wait)),
            (taken, _) => Ok(taken),
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        match lease.fallback() {
            Some(Fallback::Local) => Ok(local_lease(self.local.renew(inside(lease)?).await?)),
            Some(_) => Ok(lease.renewed(lease.ttl(), Instant::now())),
            None => {
                let renewed = self.inner().await?.renew(lease).await;
                if let Some(c) = self.companion(lease) {
                    match &renewed {
                        Ok(_) => {
                            if let Ok(c) = self.local.renew(&c).await {
                                self.companions().insert(lease.owner().clone(), c);
                            }
                        }
                        Err(LockError::LeaseLost { .. }) => {
                            self.drop_companion(lease);
                            let _ = self.local.release(&c).await;
                        }
                        Err(_) => {}
                    }
                }
                renewed
            }
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        match lease.fallback() {
            Some(Fallback::Local) => self.local.release(inside(lease)?).await,
            Some(_) => Ok(true),
            None => {
                let released = self.inner().await?.release(lease).await;
                if let Some(c) = self.drop_companion(lease) {
                    let _ = self.local.release(&c).await;
                }
                released
            }
        }
    }

    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        match lease.fallback() {
            Some(Fallback::Local) => self.local.release_after(inside(lease)?, linger).await,
            Some(_) => Ok(true),
            None => {
                let released = self.inner().await?.release_after(lease, linger).await;
                if let Some(c) = self.drop_companion(lease) {
                    let _ = self.local.release_after(&c, linger).await;
                }
                released
            }
        }
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.inner().await?.inspect(name).await
    }

    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        self.inner().await?.holders(name, of).await
    }

    async fn hand_over(&self, lease: &Lease) -> Result<crate::Ticket, LockError> {
        match lease.fallback() {
            Some(_) => crate::Ticket::of(self.backend_name(), lease), // refused: not on the server
            None => self.inner().await?.hand_over(lease).await,
        }
    }

    async fn proclaim(&self, lease: &Lease, value: &crate::HolderValue) -> Result<(), LockError> {
        crate::backend::proclaimable(self.backend_name(), lease)?; // a fallback lease: no
        self.inner().await?.proclaim(lease, value).await
    }

    async fn resume(&self, ticket: &crate::Ticket) -> Result<Lease, LockError> {
        self.inner().await?.resume(ticket).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<crate::Held>, LockError> {
        self.inner().await?.list(prefix).await
    }

    async fn diagnose(&self) -> Result<Vec<crate::Finding>, LockError> {
        self.inner().await?.diagnose().await
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.inner().await?.break_holder(name).await
    }

    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.inner().await?.revoke_holder(name).await
    }

    async fn holder_changed(&self, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        self.inner().await?.holder_changed(watch).await
    }

    fn capabilities(&self) -> Capabilities {
        self.connected()
            .map_or_else(Capabilities::per_lease, |i| i.capabilities())
    }

    fn backend_name(&self) -> &'static str {
        self.connected().map_or("unconnected", |i| i.backend_name())
    }
}
