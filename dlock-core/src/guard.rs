//! `LockGuard`: a held lease with a renewal watchdog, and a signal when it is lost.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::{DistributedLock, FencingToken, Lease, LockError};

mod renewals;
mod watchdog;
use renewals::{Renewals, Slot};

/// The state of a [`LockGuard`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardState {
    /// The last renewal succeeded (or none was due yet).
    Held,
    /// A renewal failed without an answer; the lease is still valid until
    /// `valid_until`, and the watchdog keeps retrying.
    Suspect,
    /// The server refused a renewal, or `valid_until` passed without a successful
    /// one. Stop touching the protected resource.
    Lost,
    /// Released by the guard's owner.
    Released,
    /// The hold reached its cap ([`crate::Locker::with_max_hold`]): renewal stopped,
    /// and [`LockGuard::lost`] fired. Stop touching the protected resource and release.
    Expired,
}

impl GuardState {
    /// Lost, released or expired: the guard's hold is over for good.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(self, Self::Lost | Self::Released | Self::Expired)
    }
}

/// Limits on how long a guard holds its lock (see [`crate::Locker::with_max_hold`] and
/// [`crate::Locker::with_min_hold`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HoldPolicy {
    /// The longest hold: the guard stops renewing then and reports
    /// [`GuardState::Expired`].
    pub max_hold: Option<Duration>,
    /// The shortest hold (a lock-delay): a release before it keeps the name blocked
    /// until it has passed, on the server.
    pub min_hold: Option<Duration>,
}

struct Shared {
    lease: Mutex<Lease>,
    state: Mutex<GuardState>,
    /// Signalled when the guard's life ends (lost or released). A plain `Notify`
    /// rather than a watch channel: a guard is per held lock, and its size counts.
    ended: Notify,
    /// The guard's entry in its runtime's renewal timetable, while it has one.
    slot: Mutex<Option<Slot>>,
    backend: &'static str,
    /// Whether its metrics carry the lock's name (labels are built when recorded: a
    /// guard is per held lock, and its size counts).
    name_label: bool,
    acquired: Instant,
    policy: HoldPolicy,
}

impl Shared {
    fn lease(&self) -> Lease {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_lease(&self, lease: Lease) {
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner) = lease;
    }

    fn state(&self) -> GuardState {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Slot>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When the hold reaches its cap ([`HoldPolicy::max_hold`]), if it has one.
    fn cap(&self) -> Option<Instant> {
        self.policy
            .max_hold
            .and_then(|m| self.acquired.checked_add(m))
    }

    fn labels(&self) -> Vec<metrics::Label> {
        crate::instrument::labels(self.backend, self.lease().name(), self.name_label)
    }

    /// How long a release now must keep the name blocked ([`HoldPolicy::min_hold`]).
    fn linger(&self) -> Duration {
        self.policy.min_hold.map_or(Duration::ZERO, |m| {
            self.acquired
                .checked_add(m)
                .map_or(m, |end| end.saturating_duration_since(Instant::now()))
        })
    }

    /// The min-hold delay still due, or none for a lease already lost or run out: there
    /// is nothing left to keep blocked.
    fn linger_unless_lost(&self, lease: &Lease) -> Duration {
        let lost = *self.state.lock().unwrap_or_else(PoisonError::into_inner) == GuardState::Lost;
        if lost || !lease.is_valid() {
            Duration::ZERO
        } else {
            self.linger()
        }
    }

    /// Moves to `state` (Lost and Released are final); records the hold time when the
    /// guard's life ends, and the loss.
    fn set_state(&self, state: GuardState) -> bool {
        let lock = self.lease().name().clone();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = *s != state && !s.is_final();
        if !changed {
            return false;
        }
        match state {
            GuardState::Lost => {
                tracing::warn!(%lock, backend = self.backend, from = ?*s, "lease lost");
            }
            GuardState::Expired => {
                tracing::warn!(%lock, backend = self.backend, "maximum hold reached; renewal stopped");
            }
            _ => {
                tracing::debug!(%lock, backend = self.backend, from = ?*s, to = ?state, "lock guard state");
            }
        }
        *s = state;
        drop(s);
        if state.is_final() {
            metrics::histogram!(crate::metric_names::HOLD, self.labels())
                .record(self.acquired.elapsed().as_secs_f64());
            self.ended.notify_waiters();
        }
        if matches!(state, GuardState::Lost | GuardState::Expired) {
            metrics::counter!(crate::metric_names::LEASES_LOST, self.labels()).increment(1);
        }
        true
    }
}

/// A held lock that renews itself in the background at about a third of its TTL.
///
/// Call [`LockGuard::release`] when done. Dropping a guard without it stops renewal and
/// releases the lock in a background task (best effort: if that fails, the lease
/// expires by its TTL).
pub struct LockGuard {
    lock: Arc<dyn DistributedLock>,
    shared: Arc<Shared>,
    renewals: Arc<Renewals>,
    finished: bool,
}

impl LockGuard {
    /// Wraps a lease obtained directly from a backend and starts renewing it.
    ///
    /// # Panics
    /// Outside a tokio runtime: the renewals run on a task of the current runtime
    /// (as every `acquire` that produced the lease did).
    #[must_use]
    pub fn new(lock: Arc<dyn DistributedLock>, lease: Lease) -> Self {
        Self::start(lock, lease, false, HoldPolicy::default())
    }

    /// As [`LockGuard::new`], holding by `policy`.
    ///
    /// # Panics
    /// As [`LockGuard::new`].
    #[must_use]
    pub fn with_policy(lock: Arc<dyn DistributedLock>, lease: Lease, policy: HoldPolicy) -> Self {
        Self::start(lock, lease, false, policy)
    }

    pub(crate) fn start(
        lock: Arc<dyn DistributedLock>,
        lease: Lease,
        name_label: bool,
        policy: HoldPolicy,
    ) -> Self {
        let shared = Arc::new(Shared {
            lease: Mutex::new(lease),
            state: Mutex::new(GuardState::Held),
            ended: Notify::new(),
            slot: Mutex::new(None),
            backend: lock.backend_name(),
            name_label,
            acquired: Instant::now(),
            policy,
        });
        let grid = lock.capabilities().batched_renewals;
        let renewals = Renewals::current();
        renewals.add(Arc::clone(&lock), Arc::clone(&shared), grid);
        Self {
            lock,
            shared,
            renewals,
            finished: false,
        }
    }

    /// The fencing token.
    #[must_use]
    pub fn token(&self) -> FencingToken {
        self.shared.lease().token()
    }

    /// Proclaims `value` for the guard's lease
    /// ([`DistributedLock::proclaim`]).
    pub(crate) async fn proclaim(&self, value: &crate::HolderValue) -> Result<(), LockError> {
        if self.shared.state().is_final() {
            return Err(LockError::lease_lost(self.shared.lease().name()));
        }
        self.lock.proclaim(&self.shared.lease(), value).await
    }

    /// The current lease (as last renewed).
    #[must_use]
    pub fn lease(&self) -> Lease {
        self.shared.lease()
    }

    /// The guard's state.
    #[must_use]
    pub fn state(&self) -> GuardState {
        self.shared.state()
    }

    /// `true` while the lease is certainly valid: held or suspect, and before
    /// `valid_until` (and before the hold's cap).
    #[must_use]
    pub fn is_held(&self) -> bool {
        matches!(self.state(), GuardState::Held | GuardState::Suspect) && self.lease().is_valid()
    }

    /// A future that completes when the lease is lost, or the hold reached its cap
    /// (not when it is released).
    /// It does not borrow the guard, so it can race the guarded work in `select!`.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + use<> {
        let shared = Arc::clone(&self.shared);
        async move {
            loop {
                let ended = shared.ended.notified();
                tokio::pin!(ended);
                // registered before the state is read, so a change in between wakes it
                ended.as_mut().enable();
                match shared.state() {
                    GuardState::Lost | GuardState::Expired => return,
                    // Released: nothing will ever be lost any more.
                    GuardState::Released => std::future::pending::<()>().await,
                    GuardState::Held | GuardState::Suspect => ended.await,
                }
            }
        }
    }

    /// Stops renewal and releases the lock. `Ok(false)` if it was no longer held.
    ///
    /// Under a [`HoldPolicy::min_hold`] not yet reached, the name stays blocked until
    /// it is, on the server ([`DistributedLock::release_after`]).
    ///
    /// # Errors
    /// A backend error; the lease then expires by its TTL.
    ///
    /// # Cancel safety
    /// Renewal has stopped once it is called; dropped before the release was answered,
    /// the lock is held until its TTL at the latest.
    pub async fn release(mut self) -> Result<bool, LockError> {
        self.finished = true;
        // renewal stopped first: the lease read next is the last one renewed
        self.stop_renewing();
        let lease = self.shared.lease();
        let linger = self.shared.linger_unless_lost(&lease);
        release(&*self.lock, &lease, linger).await
    }

    /// Releases at once, without the [`HoldPolicy::min_hold`] delay: for a hold that
    /// did no work — one part of a multi-lock that could not take every name.
    ///
    /// # Errors
    /// As [`LockGuard::release`].
    ///
    /// # Cancel safety
    /// As [`LockGuard::release`].
    pub async fn give_back(mut self) -> Result<bool, LockError> {
        self.finished = true;
        self.stop_renewing();
        let lease = self.shared.lease();
        self.lock.release(&lease).await
    }

    /// Renews the lease once now, out of its turn: `false` when it is lost (refused,
    /// or out of time). For a part of a multi-lock taken before a later name was
    /// awaited: broken or expired meanwhile, its guard would learn so only at its next
    /// renewal, a third of a TTL later.
    pub(crate) async fn confirm(&self) -> bool {
        if !self.is_held() {
            return false;
        }
        match self.lock.renew(&self.shared.lease()).await {
            Ok(renewed) => {
                self.shared.set_lease(renewed);
                true
            }
            Err(LockError::LeaseLost { .. }) => {
                let _ = self.shared.set_state(GuardState::Lost);
                false
            }
            // not known lost: held while its lease lasts, the watchdog retries
            Err(_) => self.is_held(),
        }
    }

    /// Stops renewal and hands the lease over for a [`crate::Ticket`]
    /// ([`DistributedLock::hand_over`]): another process takes it up with
    /// [`DistributedLock::resume`] and renews and releases it from then on. The guard
    /// is gone, so nothing here can release the ticket's lock by mistake.
    ///
    /// # Errors
    /// Those of [`DistributedLock::hand_over`]; the lock is then given back (released
    /// at once), as no guard is left to hold it.
    ///
    /// # Cancel safety
    /// Renewal has stopped once it is called; dropped before the hand-over was
    /// answered, the lease is held here still (ending with its TTL) or is the ticket's,
    /// which nobody has: it ends with its TTL.
    pub async fn hand_over(mut self) -> Result<crate::Ticket, LockError> {
        self.finished = true;
        self.stop_renewing();
        let lease = self.shared.lease();
        match self.lock.hand_over(&lease).await {
            Ok(ticket) => Ok(ticket),
            Err(e) => {
                if let Err(release) = self.lock.release(&lease).await {
                    tracing::warn!(lock = %lease.name(), error = %release, "giving back a lease whose hand-over failed did not work either; it ends with its TTL");
                }
                Err(e)
            }
        }
    }

    /// Ends the hold (`Released`, unless it was over already) and takes the guard out of
    /// the renewal timetable; a renewal in flight ends on the state change.
    fn stop_renewing(&self) {
        let _ = self.shared.set_state(GuardState::Released);
        self.renewals.forget(&self.shared);
    }

    /// The hold limits this guard keeps.
    #[must_use]
    pub fn policy(&self) -> HoldPolicy {
        self.shared.policy
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        metrics::counter!(crate::metric_names::GUARDS_DROPPED, self.shared.labels()).increment(1);
        self.stop_renewing();
        let lease = self.shared.lease();
        let linger = self.shared.linger_unless_lost(&lease);
        let lock = Arc::clone(&self.lock);
        crate::spawn_cleanup(async move {
            if let Err(e) = release(&*lock, &lease, linger).await {
                tracing::warn!(lock = %lease.name(), error = %e, "release of a dropped guard failed; the lease ends with its TTL or its session");
            }
        });
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("lease", &self.shared.lease())
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

/// A release, kept blocked for `linger` more when there is any.
async fn release(
    lock: &dyn DistributedLock,
    lease: &Lease,
    linger: Duration,
) -> Result<bool, LockError> {
    if linger.is_zero() {
        lock.release(lease).await
    } else {
        lock.release_after(lease, linger).await
    }
}
