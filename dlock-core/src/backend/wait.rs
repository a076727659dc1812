//! The `acquire` loop every adapter shares: try, subscribe, look again, sleep until
//! woken or until the holder's lease runs out.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::backoff::{Backoff, Deadline};
use crate::{Lease, LockError, LockName, random_u64};

/// The outcome of one acquisition attempt.
#[derive(Debug)]
pub enum Attempt {
    /// The lock is ours.
    Acquired(Lease),
    /// Someone else holds it; the server said for how much longer, if it did.
    Held {
        /// The holder's remaining lease time as the server sees it.
        remaining: Option<Duration>,
    },
}

impl Attempt {
    /// The lease if acquired (what `try_acquire` returns).
    #[must_use]
    pub fn into_lease(self) -> Option<Lease> {
        match self {
            Self::Acquired(lease) => Some(lease),
            Self::Held { .. } => None,
        }
    }
}

/// A registration for wake-ups about one lock: notified when the server reports a
/// release. Dropping it unregisters (the guard inside does whatever that takes).
pub struct Subscription {
    // Dropped first, while `notify` is still alive: a hub can then see a wake-up this
    // waiter never took and hand it to the next one.
    _guard: Option<Box<dyn Send + Sync>>,
    notify: Arc<Notify>,
    /// More sources, any of which wakes this subscription (Redlock: one per node).
    others: Vec<Subscription>,
}

impl Subscription {
    /// A subscription woken through `notify`; `guard` is dropped with it.
    #[must_use]
    pub fn new(notify: Arc<Notify>, guard: Option<Box<dyn Send + Sync>>) -> Self {
        Self {
            _guard: guard,
            notify,
            others: Vec::new(),
        }
    }

    /// One subscription woken by whichever of `subscriptions` is woken first.
    ///
    /// # Panics
    /// When `subscriptions` is empty.
    #[must_use]
    pub fn any_of(mut subscriptions: Vec<Subscription>) -> Self {
        let mut first = subscriptions.remove(0);
        for mut s in subscriptions {
            let nested = std::mem::take(&mut s.others);
            first.others.push(s);
            first.others.extend(nested);
        }
        first
    }

    /// Completes at the next wake-up (or at once if one came since the last).
    ///
    /// # Cancel safety
    /// Dropping it changes nothing: a later call still sees a notification sent since
    /// the subscription began.
    pub async fn notified(&self) {
        if self.others.is_empty() {
            return self.notify.notified().await;
        }
        // `any_of` keeps the list flat: every other source is one `Notify`
        let mut all: Vec<_> = std::iter::once(&self.notify)
            .chain(self.others.iter().map(|s| &s.notify))
            .map(|n| Box::pin(n.notified()))
            .collect();
        std::future::poll_fn(|cx| {
            if all.iter_mut().any(|f| f.as_mut().poll(cx).is_ready()) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
    }
}

/// How an adapter waits when the lock is busy.
#[derive(Clone, Copy, Debug)]
pub struct WaitPolicy {
    /// First polling delay (polling backends).
    pub poll_min: Duration,
    /// Longest polling delay (polling backends).
    pub poll_max: Duration,
    /// Longest sleep while subscribed, in case a notification was lost.
    pub notify_fallback: Duration,
}

impl WaitPolicy {
    /// How long a waiting writer's intent keeps new readers out after its last
    /// attempt: three of the longest gaps between a waiter's attempts (a poll at its
    /// slowest, or the fallback check under notifications), so a writer that is still
    /// waiting always renews it in time, and one that gave up blocks readers no longer.
    #[must_use]
    pub fn writer_intent(&self) -> Duration {
        self.poll_max.max(self.notify_fallback) * 3
    }
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self {
            poll_min: Duration::from_millis(4),
            poll_max: Duration::from_millis(100),
            notify_fallback: Duration::from_secs(1),
        }
    }
}

/// Runs `attempt` until it acquires or `wait` runs out.
///
/// After the first failed attempt it calls `subscribe` (so the uncontended path pays
/// nothing) and, if that gives a subscription, attempts once more at once, so a
/// release between the failed attempt and the subscription is not missed. Then it
/// sleeps until notified, until the holder's lease should have run out, or for a
/// jittered fallback, whichever is first; without a subscription it polls with
/// jittered exponential backoff capped by the holder's remaining time.
///
/// Transient errors ([`LockError::Unavailable`]) are retried within `wait`; if the
/// wait ends on one, that error is returned rather than `Timeout`, so the caller can
/// tell an outage from a busy lock. A semaphore held under another count
/// ([`LockError::PermitsMismatch`]) is waited out the same way: the name takes a new
/// count once it is idle.
///
/// # Errors
/// [`LockError::Timeout`], or the last error from `attempt`.
///
/// # Cancel safety
/// As [`crate::DistributedLock::acquire`]: a lock taken by an attempt whose answer was
/// dropped is held until its TTL.
pub async fn wait_for_lock<A, AF, S, SF>(
    name: &LockName,
    wait: Duration,
    policy: &WaitPolicy,
    mut attempt: A,
    mut subscribe: S,
) -> Result<Lease, LockError>
where
    A: FnMut() -> AF,
    AF: Future<Output = Result<Attempt, LockError>>,
    S: FnMut() -> SF,
    SF: Future<Output = Option<Subscription>>,
{
    let deadline = Deadline::after(wait);
    let mut backoff = Backoff::new(policy.poll_min, policy.poll_max);
    let mut subscription: Option<Subscription> = None;
    let mut tried_subscribe = false;
    loop {
        let mut refused = None;
        let (remaining, last_error) = match attempt().await {
            Ok(Attempt::Acquired(lease)) => return Ok(lease),
            Ok(Attempt::Held { remaining }) => (remaining, None),
            Err(e) if e.is_transient() => {
                tracing::debug!(lock = %name, error = %e, "acquire attempt failed; retrying");
                (None, Some(e))
            }
            Err(e) if waits_out(&e) => {
                refused = Some(e);
                (None, None)
            }
            Err(e) => return Err(e),
        };
        if deadline.passed() {
            return Err(last_error
                .or(refused)
                .unwrap_or_else(|| LockError::Timeout {
                    name: name.to_string(),
                    waited: deadline.waited(),
                }));
        }
        if !tried_subscribe && last_error.is_none() {
            tried_subscribe = true;
            subscription = subscribe().await;
            if subscription.is_some() {
                continue;
            }
        }
        let delay = match (&subscription, &last_error) {
            (Some(_), None) => {
                let cap = jittered(policy.notify_fallback);
                remaining.map_or(cap, |r| (r + Duration::from_millis(1)).min(cap))
            }
            _ => backoff.next_delay(remaining),
        }
        .min(deadline.remaining());
        match &subscription {
            Some(s) => {
                tokio::select! {
                    () = s.notified() => {}
                    () = tokio::time::sleep(delay) => {}
                }
            }
            None => tokio::time::sleep(delay).await,
        }
    }
}

/// Runs a whole queue-style acquisition, `attempt(remaining wait)`, again after a
/// transient error ([`LockError::Unavailable`]) until `wait` runs out: the rule every
/// `acquire` keeps (see [`crate::DistributedLock::acquire`]); and after a refused
/// permit count ([`LockError::PermitsMismatch`]), which ends when the name goes idle,
/// as [`wait_for_lock`] waits it out. Each failed attempt must
/// leave nothing behind (its queue entry deleted by its drop guard); the next one joins
/// the queue anew. Between attempts it sleeps a jittered, growing pause (10 ms … 500 ms).
///
/// # Errors
/// The last attempt's error: `Timeout`, a permanent error, or the transient error that
/// was still there when `wait` ran out.
///
/// # Cancel safety
/// As the operation it retries: dropping it drops the attempt in flight.
pub async fn retry_transient<F, Fut>(
    name: &LockName,
    wait: Duration,
    mut attempt: F,
) -> Result<Lease, LockError>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<Lease, LockError>>,
{
    let deadline = Deadline::after(wait);
    let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(500));
    loop {
        match attempt(deadline.remaining()).await {
            Err(e) if (e.is_transient() || waits_out(&e)) && !deadline.passed() => {
                tracing::debug!(lock = %name, error = %e, "acquire failed; trying again within its wait");
                tokio::time::sleep(backoff.next_delay(None).min(deadline.remaining())).await;
            }
            other => return other,
        }
    }
}

/// A refusal that ends without anyone's doing: a semaphore held under another count is
/// released in time, and an idle name takes the waiter's count. Waiting instead of
/// failing also rides out an entry of another count left by a killed caller.
fn waits_out(e: &LockError) -> bool {
    matches!(e, LockError::PermitsMismatch { .. })
}

/// A random duration in `[cap/2, cap]`, so waiters do not all look at once.
fn jittered(cap: Duration) -> Duration {
    let half = cap / 2;
    let range = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
    half + Duration::from_micros(random_u64() % range)
}
