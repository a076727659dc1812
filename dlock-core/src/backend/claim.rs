//! The claim family's algorithm (Redis, Redlock, SQL): a lock is one record that an
//! attempt takes when it is free, expired, or already the attempt's own.
//!
//! A [`ClaimDriver`] is the backend's protocol — one attempt, one release, an optional
//! wake-up source — and [`try_claim`] / [`claim`] are everything around it, written
//! once: TTL validation, the owner id, a grant that came back too late to be trusted
//! given back (the trait's rule 5), subscribe-then-recheck waiting ([`wait_for_lock`]),
//! and the retry rule for transient errors.
//!
//! The same driver carries the other primitives: an attempt names its [`Access`], and
//! a semaphore is a holder set admitting up to N permits, a read-write lock a holder set
//! admitting readers while no writer holds it or waits (a waiting writer's intent keeps
//! new readers out, so writers do not starve) — each an attempt of the same shape, so
//! no new waiting code.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{Attempt, AttemptRequest, Backend, Subscription, WaitPolicy, wait_for_lock};
use crate::{Access, Acquisition, FencingToken, Lease, LockError, LockName, OwnerId};

/// What one claim found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// Taken for the owner, with this fencing token.
    Taken(FencingToken),
    /// Someone else holds it, for this long more as the server sees it (if it said).
    Held(Option<Duration>),
    /// Handed to the owner by a release while it waited in the server's queue (a
    /// backend whose release grants, [`crate::Capabilities::fair`]): the lock is ours
    /// with `token`, and no attempt was sent for it. `since` is when the waiter sent
    /// its last attempt that the server answered with "queued" — the grant came after
    /// the server read that attempt, so the lease counts from `since` (the trait's rule
    /// 5: a lease's validity starts no later than the server's grant).
    Granted {
        /// The fencing token the release gave.
        token: FencingToken,
        /// A moment no later than the grant, on this client's clock.
        since: Instant,
    },
}

/// A claim backend's protocol (see the [module](self)); releasing is the
/// [`Backend`]'s.
#[async_trait]
pub trait ClaimDriver: Backend {
    /// One attempt to take the request's `name` with its `access` for its `owner` for
    /// its `ttl`: when it admits
    /// one more such holder, or already holds `owner` — an earlier attempt of the same
    /// acquisition whose answer was lost may have committed, and a retry must find its
    /// own record taken, not busy. A backend without [`crate::Capabilities::shared`]
    /// answers [`LockError::Unsupported`] for anything but [`Access::Exclusive`].
    ///
    /// `request.waits`: the caller will wait and try again if this attempt fails. A writer's
    /// failed attempt that waits leaves an intent, live for
    /// [`WaitPolicy::writer_intent`], that refuses new readers until the writer got the
    /// lock or stopped trying — so a steady stream of readers cannot starve it.
    ///
    /// # Cancel safety
    /// As [`crate::DistributedLock::try_acquire`]: a claim whose answer was dropped may
    /// hold the lock until its TTL.
    async fn claim(&self, request: &AttemptRequest<'_>) -> Result<Claim, LockError>;

    /// Registers the request's acquisition (its owner) for a wake-up when its name (of
    /// its access's primitive) is released — or, on a backend whose release grants, when the lock is
    /// handed to `owner` (`None`: poll instead). The subscription lives as long as the
    /// acquisition waits; dropping it without having acquired is the place to leave a
    /// server-side queue.
    ///
    /// # Cancel safety
    /// Dropping it changes nothing a caller sees: the subscription, if made, ends with
    /// it.
    async fn subscribe(&self, request: &AttemptRequest<'_>) -> Option<Subscription> {
        let _ = request;
        None
    }

    /// The request's waiting acquisition ended without the lock — its wait ran
    /// out, it failed, or it was dropped. A backend that queues waiters on the server
    /// removes the owner's entry here, and gives back a grant made to it that it never
    /// took. Called from a drop, so it must not block: work that needs the server goes
    /// to a task of the current runtime (best effort; a backend's queue must also drop
    /// a waiter that never leaves — a killed process — on its own). The default does
    /// nothing.
    fn abandon(&self, request: &AttemptRequest<'_>) {
        let _ = request;
    }

    /// Registers an observer (no acquisition: a leader watch) for a wake-up at the
    /// next release of `name`'s exclusive lock (`None`: poll instead). The default is
    /// [`ClaimDriver::subscribe`] with a placeholder owner, right for a backend whose
    /// wake-ups do not depend on who waits; one whose waiters hear only their own grant
    /// says here where releases are announced.
    ///
    /// # Cancel safety
    /// As [`ClaimDriver::subscribe`].
    async fn watch(&self, name: &LockName) -> Option<Subscription> {
        let observer = OwnerId::from_stored("observer");
        let request = AttemptRequest::new(name, Access::Exclusive, &observer, Duration::ZERO);
        self.subscribe(&request).await
    }

    /// How to wait when the lock is busy.
    fn wait_policy(&self) -> WaitPolicy;
}

/// One attempt with a lease around it: the lease's validity counts from the moment
/// the attempt was sent, and a grant that arrives already past it is given back and
/// reported as held (the trait's rule 5: never hand out a lease that may have expired).
///
/// # Errors
/// The driver's error.
///
/// # Cancel safety
/// As [`crate::DistributedLock::try_acquire`].
pub async fn attempt<D: ClaimDriver + ?Sized>(
    driver: &D,
    request: &AttemptRequest<'_>,
) -> Result<Attempt, LockError> {
    let sent = Instant::now();
    let (name, access, owner, ttl) = (request.name, request.access, request.owner, request.ttl);
    let (token, sent) = match driver.claim(request).await? {
        Claim::Taken(token) => (token, sent),
        Claim::Granted { token, since } => (token, since),
        Claim::Held(remaining) => return Ok(Attempt::Held { remaining }),
    };
    let lease = Lease::new(name.clone(), owner.clone(), token, ttl, sent).with_access(access);
    if lease.is_valid() {
        Ok(Attempt::Acquired(lease))
    } else {
        let _ = Backend::release(driver, &lease).await;
        Ok(Attempt::Held {
            remaining: Some(Duration::ZERO),
        })
    }
}

/// `try_acquire` (or a shared kin, per `access`) for a claim backend: one attempt.
///
/// # Errors
/// `InvalidArgument` for a TTL or permit count out of range; the driver's error.
///
/// # Cancel safety
/// Dropping it after the request was sent may leave the record taken until its TTL.
pub async fn try_claim<D: ClaimDriver + ?Sized>(
    driver: &D,
    acquisition: &Acquisition<'_>,
) -> Result<Option<Lease>, LockError> {
    let access = acquisition.access().validate()?;
    let (name, ttl) = (acquisition.name(), acquisition.ttl());
    let owner = super::new_acquisition(ttl, acquisition.value())?;
    let request = AttemptRequest::new(name, access, &owner, ttl);
    Ok(attempt(driver, &request).await?.into_lease())
}

/// `acquire` (or a shared kin, per `access`) for a claim backend: attempts under one owner id until one takes the
/// lock or `wait` runs out, woken by the driver's subscription or polling.
///
/// # Errors
/// `InvalidArgument` for a TTL out of range; `Timeout`; the driver's last transient
/// error when the wait ended on one; any permanent error at once.
///
/// # Cancel safety
/// Dropping it between attempts leaves nothing behind (a queued entry is left through
/// [`ClaimDriver::abandon`], in the background); during one, the record may stay taken
/// until its TTL — or until that background leave gives it back.
pub async fn claim<D: ClaimDriver + ?Sized>(
    driver: &D,
    acquisition: &Acquisition<'_>,
    wait: Duration,
) -> Result<Lease, LockError> {
    let access = acquisition.access().validate()?;
    let (name, ttl) = (acquisition.name(), acquisition.ttl());
    let owner = super::new_acquisition(ttl, acquisition.value())?;
    let waits = !wait.is_zero();
    let request = AttemptRequest::new(name, access, &owner, ttl).waiting(waits);
    let mut abandoned = Abandoned {
        driver,
        request: &request,
        armed: waits,
    };
    let taken = wait_for_lock(
        name,
        wait,
        &driver.wait_policy(),
        || attempt(driver, &request),
        || driver.subscribe(&request),
    )
    .await;
    abandoned.armed &= taken.is_err();
    taken
}

/// Tells the driver a waiting acquisition ended without the lock
/// ([`ClaimDriver::abandon`]) when dropped armed: on an error, and when the
/// acquisition's future is dropped mid-wait.
struct Abandoned<'a, D: ClaimDriver + ?Sized> {
    driver: &'a D,
    request: &'a AttemptRequest<'a>,
    armed: bool,
}

impl<D: ClaimDriver + ?Sized> Drop for Abandoned<'_, D> {
    fn drop(&mut self) {
        if self.armed {
            self.driver.abandon(self.request);
        }
    }
}
