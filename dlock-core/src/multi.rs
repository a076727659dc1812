//! Several names taken as one (Redisson's `MultiLock`): in one canonical order, all or
//! nothing.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use crate::{
    Deadline, FencingToken, LockError, LockGuard, LockName, Locker, ToLockName, canonical_names,
};

/// Guards on several names at once, from [`Locker::lock_all`]: held while every part
/// is held; [`MultiGuard::lost`] fires when any part is lost.
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

type Lost = Pin<Box<dyn Future<Output = ()> + Send>>;

impl MultiGuard {
    /// Guards taken one by one, as one: give them in the canonical (sorted) order of
    /// their names, as [`Locker::lock_all`] takes them.
    #[must_use]
    pub fn new(guards: Vec<LockGuard>) -> Self {
        Self { guards }
    }

    /// Each name with its fencing token, in the canonical (sorted) order.
    #[must_use]
    pub fn tokens(&self) -> Vec<(LockName, FencingToken)> {
        self.guards
            .iter()
            .map(|g| (g.lease().name().clone(), g.token()))
            .collect()
    }

    /// The guards, in the canonical order.
    #[must_use]
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// `true` while every part is certainly held.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(LockGuard::is_held)
    }

    /// Completes when any part is lost (or reaches its hold cap).
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut all: Vec<Lost> = self
            .guards
            .iter()
            .map(|g| Box::pin(g.lost()) as Lost)
            .collect();
        std::future::poll_fn(move |cx| {
            if all.iter_mut().any(|f| f.as_mut().poll(cx).is_ready()) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    /// Releases every part. `Ok(true)` when every part was still held; `Ok(false)` when
    /// one was not, whatever the others answered (a proof of a lost part weighs more
    /// than an error that proves nothing).
    ///
    /// # Errors
    /// The first backend error, when no part was found not held; every part is released
    /// (or tried) regardless.
    ///
    /// # Cancel safety
    /// Dropped before every part was answered, the parts not yet released are held
    /// until their TTL at the latest.
    pub async fn release(self) -> Result<bool, LockError> {
        let mut all_held = true;
        let mut first_error = None;
        for guard in self.guards {
            match guard.release().await {
                Ok(held) => all_held &= held,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if all_held => Err(e),
            _ => Ok(all_held),
        }
    }
}

impl Locker {
    /// Takes every name in `names` (sorted, duplicates dropped), waiting up to the
    /// locker's wait for all of them together. On a failure, a timeout or a
    /// cancellation, every name already taken is released: nothing stays held.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use dlock_core::{Locker, MemoryLock};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dlock_core::LockError> {
    /// let locker = Locker::new(Arc::new(MemoryLock::new()));
    /// let both = locker.lock_all(["account/b", "account/a"]).await?;
    /// assert_eq!(both.tokens()[0].0.as_str(), "account/a"); // canonical order
    /// assert!(locker.try_lock("account/b").await?.is_none());
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::InvalidArgument`] for an empty set, and
    /// those of [`Locker::lock`].
    ///
    /// # Cancel safety
    /// Dropping it drops the guards taken so far, which release in the background.
    pub async fn lock_all<I, S>(&self, names: I) -> Result<MultiGuard, LockError>
    where
        I: IntoIterator<Item = S>,
        S: ToLockName,
    {
        self.lock_all_with(names, |_| std::future::pending()).await
    }

    /// As [`Locker::lock_all`], running `while_waiting(name)` beside the wait for each
    /// name (a progress report, say) and dropping it once that name is taken or the
    /// wait ends. With no wait ([`Locker::with_wait`] zero) each name is tried once,
    /// and a busy one ends it with `Timeout` naming it, so a caller can tell which.
    ///
    /// # Errors
    /// As [`Locker::lock_all`].
    ///
    /// # Cancel safety
    /// As [`Locker::lock_all`].
    pub async fn lock_all_with<I, S, W, WF>(
        &self,
        names: I,
        mut while_waiting: W,
    ) -> Result<MultiGuard, LockError>
    where
        I: IntoIterator<Item = S>,
        S: ToLockName,
        W: FnMut(&LockName) -> WF,
        WF: Future<Output = ()>,
    {
        let names = canonical_names(names)?;
        let deadline = Deadline::after(self.wait_limit());
        let mut guards = Vec::with_capacity(names.len());
        for name in &names {
            let taken = if self.wait_limit().is_zero() {
                // no wait: a try (counted as busy, not as a wait that timed out)
                self.try_lock(name).await.and_then(|g| {
                    g.ok_or_else(|| LockError::Timeout {
                        name: name.to_string(),
                        waited: std::time::Duration::ZERO,
                    })
                })
            } else {
                let side = while_waiting(name);
                tokio::select! {
                    taken = self.lock_within(name, deadline.remaining()) => taken,
                    never = async { side.await; std::future::pending().await } => match never {},
                }
            };
            match taken {
                Ok(g) => guards.push(g),
                Err(e) => {
                    release_all(guards).await;
                    return Err(e);
                }
            }
        }
        // the names taken before the last may have been lost while it was awaited
        if let Some((_, earlier)) = guards.split_last() {
            for g in earlier {
                g.confirm().await;
            }
        }
        all_still_held(guards).await
    }

    /// Takes every name in `names` if all are free now; `Ok(None)` (nothing held)
    /// otherwise.
    ///
    /// # Errors
    /// As [`Locker::lock_all`].
    ///
    /// # Cancel safety
    /// As [`Locker::lock_all`].
    pub async fn try_lock_all<I, S>(&self, names: I) -> Result<Option<MultiGuard>, LockError>
    where
        I: IntoIterator<Item = S>,
        S: ToLockName,
    {
        let names = canonical_names(names)?;
        let mut guards = Vec::with_capacity(names.len());
        for name in &names {
            match self.try_lock(name).await {
                Ok(Some(g)) => guards.push(g),
                other => {
                    release_all(guards).await;
                    return other.map(|_| None);
                }
            }
        }
        all_still_held(guards).await.map(Some)
    }

    /// Runs `work` holding every name, passing the tokens in canonical order; as
    /// [`Locker::with_lock`], the work is cancelled when any part is lost.
    ///
    /// # Errors
    /// Those of [`Locker::lock_all`], [`LockError::LeaseLost`] and
    /// [`LockError::HoldExpired`].
    ///
    /// # Cancel safety
    /// As [`Locker::with_lock`].
    pub async fn with_lock_all<I, S, F, Fut, T>(&self, names: I, work: F) -> Result<T, LockError>
    where
        I: IntoIterator<Item = S>,
        S: ToLockName,
        F: FnOnce(Vec<(LockName, FencingToken)>) -> Fut,
        Fut: Future<Output = T>,
    {
        let all = self.lock_all(names).await?;
        let lost = all.lost();
        tokio::select! {
            biased;
            () = lost => {
                let error = all
                    .guards
                    .iter()
                    .find(|g| g.state().is_final())
                    .map_or_else(
                        || LockError::lease_lost(all.guards[0].lease().name()),
                        |g| crate::locker::ended(g, g.lease().name()),
                    );
                let _ = all.release().await;
                Err(error)
            }
            out = work(all.tokens()) => {
                if let Err(e) = all.release().await {
                    tracing::warn!(error = %e, "release after with_lock_all failed; the leases will expire by their TTL");
                }
                Ok(out)
            }
        }
    }
}

/// Gives back the parts of a multi-lock that could not be completed: at once, without
/// a `min_hold` delay — no work was done under them.
async fn release_all(guards: Vec<LockGuard>) {
    for g in guards {
        let _ = g.give_back().await;
    }
}

/// The guards as one, if every one is still held: a part lost while a later name was
/// awaited (broken, expired, cut off) is never handed out as held — everything is given
/// back and the lost name named.
async fn all_still_held(guards: Vec<LockGuard>) -> Result<MultiGuard, LockError> {
    match guards.iter().find(|g| !g.is_held()) {
        None => Ok(MultiGuard { guards }),
        Some(lost) => {
            let name = lost.lease().name().clone();
            release_all(guards).await;
            Err(LockError::lease_lost(&name))
        }
    }
}
