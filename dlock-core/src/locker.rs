//! `Locker`: acquisition with a default TTL, wait and hold limits, handing out
//! self-renewing [`LockGuard`]s.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::{
    Acquisition, DistributedLock, FencingToken, HoldPolicy, HolderValue, Lease, LockError,
    LockGuard, LockName, ToLockName,
};

/// Acquires locks with default TTL and wait, and hands out [`LockGuard`]s that renew
/// themselves.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use dlock_core::{Locker, MemoryLock};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_core::LockError> {
/// let locker = Locker::new(Arc::new(MemoryLock::new())).with_ttl(Duration::from_secs(10));
/// let total = locker
///     .with_lock("reports/daily", |token| async move {
///         // write to the resource, passing `token` along
///         token.get()
///     })
///     .await?;
/// assert_eq!(total, 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Locker {
    lock: Arc<dyn DistributedLock>,
    ttl: Duration,
    wait: Duration,
    name_label: bool,
    policy: HoldPolicy,
    value: Option<HolderValue>,
}

/// Default lease TTL of a [`Locker`].
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// Default `acquire` wait of a [`Locker`].
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

impl Locker {
    /// A locker over `lock` with a 30 s TTL and a 30 s wait.
    #[must_use]
    pub fn new(lock: Arc<dyn DistributedLock>) -> Self {
        Self {
            lock,
            ttl: DEFAULT_TTL,
            wait: DEFAULT_WAIT,
            name_label: false,
            policy: HoldPolicy::default(),
            value: None,
        }
    }

    /// Stores `value` with every lease this locker takes, for anyone who inspects the
    /// lock: who holds it ([`crate::ProcessHolder`]), or a leader's address.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use dlock_core::{Locker, MemoryLock, ProcessHolder};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dlock_core::LockError> {
    /// let backend = Arc::new(MemoryLock::new());
    /// let me = ProcessHolder::this_process("invoice-sync").to_value()?;
    /// let locker = Locker::new(backend.clone()).with_value(me);
    /// let guard = locker.lock("invoices").await?;
    /// let holder = dlock_core::DistributedLock::inspect(&*backend, guard.lease().name()).await?;
    /// let process = ProcessHolder::of(&holder.expect("held").owner).expect("it said");
    /// assert_eq!(process.command, "invoice-sync");
    /// # guard.release().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_value(mut self, value: HolderValue) -> Self {
        self.value = Some(value);
        self
    }

    /// Labels the guards' metrics with the lock name too (one series per name: mind
    /// the cardinality). See [`crate::metric_names`].
    #[must_use]
    pub fn with_name_label(mut self, on: bool) -> Self {
        self.name_label = on;
        self
    }

    /// Sets the lease TTL; the watchdog renews at about a third of it.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets how long [`Locker::lock`] waits.
    #[must_use]
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Caps every hold at `max_hold` (ShedLock's `lockAtMostFor`): at the cap the guard
    /// stops renewing and reports [`crate::GuardState::Expired`], its
    /// [`LockGuard::lost`] fires, and [`Locker::with_lock`] cancels the work and ends
    /// with [`LockError::HoldExpired`].
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use dlock_core::{LockError, Locker, MemoryLock};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let locker = Locker::new(Arc::new(MemoryLock::new()))
    ///     .with_max_hold(Duration::from_millis(50));
    /// let r = locker
    ///     .with_lock("stuck-job", |_| tokio::time::sleep(Duration::from_secs(60)))
    ///     .await;
    /// assert!(matches!(r, Err(LockError::HoldExpired { .. })));
    /// # }
    /// ```
    #[must_use]
    pub fn with_max_hold(mut self, max_hold: Duration) -> Self {
        self.policy.max_hold = Some(max_hold);
        self
    }

    /// Keeps every name blocked for at least `min_hold` after it was acquired
    /// (ShedLock's `lockAtLeastFor`, Chubby's lock-delay): a release before then cuts
    /// the lease to the remainder on the server ([`DistributedLock::release_after`]),
    /// so a job that finished early on one host does not run again at once on
    /// another, even if this process exits right after. A crash keeps the name blocked
    /// for the lease's TTL, which must therefore be at least `min_hold`.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use dlock_core::{Locker, MemoryLock};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dlock_core::LockError> {
    /// let locker = Locker::new(Arc::new(MemoryLock::new()))
    ///     .with_ttl(Duration::from_secs(10))
    ///     .with_min_hold(Duration::from_secs(5));
    /// locker.with_lock("nightly", |_| async {}).await?; // done in a moment…
    /// assert!(locker.try_lock("nightly").await?.is_none()); // …still blocked
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_min_hold(mut self, min_hold: Duration) -> Self {
        self.policy.min_hold = Some(min_hold);
        self
    }

    /// The backend.
    #[must_use]
    pub fn backend(&self) -> &Arc<dyn DistributedLock> {
        &self.lock
    }

    /// How long [`Locker::lock`] waits.
    #[must_use]
    pub fn wait_limit(&self) -> Duration {
        self.wait
    }

    /// The TTL every acquisition asks for.
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The hold limits every guard keeps.
    #[must_use]
    pub fn policy(&self) -> HoldPolicy {
        self.policy
    }

    /// Waits up to the default wait for `name` and returns a renewing guard.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::InvalidArgument`] for hold limits that
    /// do not fit the TTL, [`LockError::Timeout`], or a backend error.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire`]: dropping it leaks no lock beyond its TTL.
    pub async fn lock(&self, name: impl ToLockName) -> Result<LockGuard, LockError> {
        self.lock_within(name, self.wait).await
    }

    /// As [`Locker::lock`], waiting up to `wait`.
    ///
    /// # Errors
    /// As [`Locker::lock`].
    ///
    /// # Cancel safety
    /// As [`Locker::lock`].
    pub async fn lock_within(
        &self,
        name: impl ToLockName,
        wait: Duration,
    ) -> Result<LockGuard, LockError> {
        let name = name.to_lock_name()?;
        self.check_policy()?;
        let request = Acquisition::new(&name, self.ttl)
            .waiting(wait)
            .with_value(self.value.as_ref());
        let lease = crate::waited(self.lock.acquire_with(&request).await, &name, wait)?;
        self.guard(lease).await
    }

    /// Takes `name` if it is free.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::InvalidArgument`] for hold limits that
    /// do not fit the TTL, or a backend error.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::try_acquire`].
    pub async fn try_lock(&self, name: impl ToLockName) -> Result<Option<LockGuard>, LockError> {
        let name = name.to_lock_name()?;
        self.check_policy()?;
        let request = Acquisition::new(&name, self.ttl).with_value(self.value.as_ref());
        match self.lock.acquire_with(&request).await? {
            Some(lease) => Ok(Some(self.guard(lease).await?)),
            None => Ok(None),
        }
    }

    /// Wraps a lease just acquired through this locker's backend in a guard keeping
    /// its policy: under a `min_hold`, the lease is first renewed if the server might
    /// otherwise expire it (after a crash) before `min_hold` has passed.
    ///
    /// # Errors
    /// The renewal's error (the lease is then released).
    pub(crate) async fn guard(&self, lease: Lease) -> Result<LockGuard, LockError> {
        let start = Instant::now();
        if let Some(m) = self.policy.min_hold
            && m > lease.ttl()
        {
            // the backend granted less than asked (a ZooKeeper session timeout clamped
            // by the server): a crash would free the name before min_hold
            let _ = self.lock.release(&lease).await;
            return Err(LockError::InvalidArgument(format!(
                "min_hold {m:?} is longer than the TTL {:?} the backend granted for {}",
                lease.ttl(),
                lease.name()
            )));
        }
        let server_expiry = lease.valid_until() + crate::drift_margin(lease.ttl());
        let lease = match self.policy.min_hold {
            Some(m) if server_expiry < start + m => match self.lock.renew(&lease).await {
                Ok(renewed) => renewed,
                Err(e) => {
                    let _ = self.lock.release(&lease).await;
                    return Err(e);
                }
            },
            _ => lease,
        };
        Ok(LockGuard::start(
            Arc::clone(&self.lock),
            lease,
            self.name_label,
            self.policy,
        ))
    }

    /// Hold limits that cannot be kept are refused before anything is taken (the TTL
    /// itself is the acquisition's to check).
    fn check_policy(&self) -> Result<(), LockError> {
        if self.policy.max_hold.is_some_and(|m| m.is_zero()) {
            return Err(LockError::InvalidArgument(
                "max_hold must be positive".into(),
            ));
        }
        if let Some(min) = self.policy.min_hold {
            if min > self.ttl {
                return Err(LockError::InvalidArgument(format!(
                    "min_hold {min:?} is longer than the TTL {:?}: a crash would free the name earlier; raise the TTL",
                    self.ttl
                )));
            }
            if self.policy.max_hold.is_some_and(|max| min > max) {
                return Err(LockError::InvalidArgument(format!(
                    "min_hold {min:?} is longer than max_hold {:?}",
                    self.policy.max_hold.unwrap_or_default()
                )));
            }
        }
        Ok(())
    }

    /// Runs `work` under the lock, passing it the fencing token, and releases the lock
    /// afterwards. If the lease is lost first, `work`'s future is dropped (cancelled) and
    /// the result is [`LockError::LeaseLost`]; at the hold's cap
    /// ([`Locker::with_max_hold`]), [`LockError::HoldExpired`].
    ///
    /// # Errors
    /// Those of [`Locker::lock`], [`LockError::LeaseLost`] and
    /// [`LockError::HoldExpired`].
    ///
    /// # Cancel safety
    /// Dropping it drops `work` and the guard, whose `Drop` releases the lock in the
    /// background.
    pub async fn with_lock<F, Fut, T>(&self, name: impl ToLockName, work: F) -> Result<T, LockError>
    where
        F: FnOnce(FencingToken) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.lock(name).await?;
        under(guard, work).await
    }

    /// Runs `work` under the lock if it is free now, as [`Locker::with_lock`] does;
    /// `Ok(None)` without running it when someone holds it — a scheduled job that runs
    /// on one host per tick and is skipped on the others (ShedLock's
    /// `@SchedulerLock`, `flock -n`). With [`Locker::with_max_hold`] (lockAtMostFor)
    /// and [`Locker::with_min_hold`] (lockAtLeastFor, so a fast job on a host whose
    /// clock runs ahead does not let another host run the same tick again):
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dlock_core::LockError> {
    /// use std::{sync::Arc, time::Duration};
    /// use dlock_core::{Locker, MemoryLock};
    ///
    /// let locker = Locker::new(Arc::new(MemoryLock::new()))
    ///     .with_ttl(Duration::from_secs(60))
    ///     .with_max_hold(Duration::from_secs(50 * 60)) // never hold past the next tick
    ///     .with_min_hold(Duration::from_secs(30)); // a fast run still blocks the tick
    /// // every hour, on every host:
    /// let ran = locker
    ///     .try_with_lock("reports/hourly", |token| async move { format!("ran as {token}") })
    ///     .await?;
    /// assert!(ran.is_some()); // None on a host where another run holds it
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Those of [`Locker::try_lock`], [`LockError::LeaseLost`] and
    /// [`LockError::HoldExpired`].
    ///
    /// # Cancel safety
    /// As [`Locker::with_lock`].
    pub async fn try_with_lock<F, Fut, T>(
        &self,
        name: impl ToLockName,
        work: F,
    ) -> Result<Option<T>, LockError>
    where
        F: FnOnce(FencingToken) -> Fut,
        Fut: Future<Output = T>,
    {
        match self.try_lock(name).await? {
            Some(guard) => under(guard, work).await.map(Some),
            None => Ok(None),
        }
    }
}

/// Runs `work` while `guard` holds, then releases; `work` dropped if the hold ends
/// first.
async fn under<F, Fut, T>(guard: LockGuard, work: F) -> Result<T, LockError>
where
    F: FnOnce(FencingToken) -> Fut,
    Fut: Future<Output = T>,
{
    let lost = guard.lost();
    let name = guard.lease().name().clone();
    tokio::select! {
        biased;
        () = lost => {
            let error = ended(&guard, &name);
            // owner-checked, so harmless if someone else holds it now
            let _ = guard.release().await;
            Err(error)
        }
        out = work(guard.token()) => {
            if let Err(e) = guard.release().await {
                tracing::warn!(lock = %name, error = %e, "release after with_lock failed; the lease will expire by its TTL");
            }
            Ok(out)
        }
    }
}

/// Why a guard's `lost()` fired: its cap, or a lost lease.
pub(crate) fn ended(guard: &LockGuard, name: &LockName) -> LockError {
    match (guard.state(), guard.policy().max_hold) {
        (crate::GuardState::Expired, Some(max_hold)) => LockError::HoldExpired {
            name: name.to_string(),
            max_hold,
        },
        _ => LockError::lease_lost(name),
    }
}
