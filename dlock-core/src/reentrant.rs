//! `Reentrant`: a scope in which taking a name the scope already holds nests, as
//! Redisson's and Curator's reentrant locks do per thread.
//!
//! Plain [`LockGuard`]s stay non-reentrant on purpose. Rust has no thread identity a
//! lock could key on (a task moves between threads, and one thread runs many tasks),
//! and an implicit per-process key would let two unrelated tasks of one service both
//! "hold" a name — the lost update a lock exists to prevent. madelson's
//! DistributedLock dropped implicit reentrancy in 2.0 for the same reason. So the
//! scope is explicit: code that calls itself under a lock passes its [`Reentrant`]
//! along, and only holds taken through that scope (or its clones) nest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::{FencingToken, LockError, LockGuard, LockName, Locker, ToLockName};

/// A scope of reentrant holds over a [`Locker`]: the first [`Reentrant::lock`] of a
/// name takes it from the backend; later ones in the same scope, while it is held,
/// return nested guards that share that lease and its fencing token; the backend's
/// lock is released when the last of them is. Across scopes — another `Reentrant`,
/// another process — a held name excludes as usual.
///
/// A clone is the same scope (hand it to the tasks that should nest). When the shared
/// lease is lost, every nested guard reports it, and a further `lock` of that name in
/// the scope fails with [`LockError::LeaseLost`] until the guards are gone: code
/// running under a lost lock must stop, not take the name again without noticing.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use dlock_core::{Locker, MemoryLock, Reentrant};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_core::LockError> {
/// let locker = Locker::new(Arc::new(MemoryLock::new())).with_ttl(Duration::from_secs(10));
/// let scope = locker.reentrant();
///
/// async fn settle_account(scope: &Reentrant) -> Result<u64, dlock_core::LockError> {
///     let guard = scope.lock("accounts/7").await?; // nests when the caller holds it
///     let token = guard.token().get();
///     guard.release().await?;
///     Ok(token)
/// }
///
/// let outer = scope.lock("accounts/7").await?;
/// assert_eq!(settle_account(&scope).await?, outer.token().get()); // no self-deadlock
/// assert!(locker.try_lock("accounts/7").await?.is_none()); // other holders still wait
/// outer.release().await?; // the outermost release frees the name
/// assert!(locker.try_lock("accounts/7").await?.is_some());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Reentrant {
    locker: Locker,
    slots: Arc<Mutex<HashMap<LockName, Arc<Slot>>>>,
}

/// One name's place in a scope: its async mutex serialises first acquisitions, so two
/// tasks of one scope never both go to the backend for the same name (the second
/// would wait on the first's lease instead of nesting).
#[derive(Default)]
struct Slot {
    current: tokio::sync::Mutex<Weak<Nest>>,
}

/// How long an acquisition may wait.
#[derive(Clone, Copy)]
enum Patience {
    Now,
    Within(Duration),
}

/// Forgets a name's slot once nothing uses it, when dropped.
struct Tidy<'a> {
    scope: &'a Reentrant,
    name: &'a LockName,
}

impl Drop for Tidy<'_> {
    fn drop(&mut self) {
        self.scope.tidy(self.name);
    }
}

/// The shared hold behind a scope's nested guards.
struct Nest {
    token: FencingToken,
    hold: Mutex<Hold>,
}

struct Hold {
    /// `None` once the outermost guard has gone.
    guard: Option<LockGuard>,
    count: usize,
}

impl Locker {
    /// A new reentrant scope over this locker's backend, TTL, wait and hold limits.
    #[must_use]
    pub fn reentrant(&self) -> Reentrant {
        Reentrant {
            locker: self.clone(),
            slots: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

impl Reentrant {
    /// Takes `name`, nesting if this scope holds it, else waiting up to the locker's
    /// wait.
    ///
    /// # Errors
    /// As [`Locker::lock`]; [`LockError::LeaseLost`] (or [`LockError::HoldExpired`])
    /// if this scope's hold of `name` has been lost and is still referenced.
    ///
    /// # Cancel safety
    /// As [`Locker::lock`]; a cancelled nested acquisition changes nothing.
    pub async fn lock(&self, name: impl ToLockName) -> Result<ReentrantGuard, LockError> {
        self.lock_within(name, self.locker.wait_limit()).await
    }

    /// As [`Reentrant::lock`], waiting up to `wait`.
    ///
    /// # Errors
    /// As [`Reentrant::lock`].
    ///
    /// # Cancel safety
    /// As [`Reentrant::lock`].
    pub async fn lock_within(
        &self,
        name: impl ToLockName,
        wait: Duration,
    ) -> Result<ReentrantGuard, LockError> {
        let name = name.to_lock_name()?;
        self.take(&name, Patience::Within(wait))
            .await?
            .ok_or_else(|| LockError::Timeout {
                name: name.to_string(),
                waited: wait,
            })
    }

    /// Takes `name` if this scope holds it (nesting) or it is free; `Ok(None)` when
    /// another holder has it, or another task of this scope is taking it right now.
    ///
    /// # Errors
    /// As [`Locker::try_lock`], and the lost-hold error of [`Reentrant::lock`].
    ///
    /// # Cancel safety
    /// As [`Locker::try_lock`].
    pub async fn try_lock(
        &self,
        name: impl ToLockName,
    ) -> Result<Option<ReentrantGuard>, LockError> {
        let name = name.to_lock_name()?;
        self.take(&name, Patience::Now).await
    }

    /// Nests into this scope's live hold of `name`, or takes it from the backend;
    /// `None` when busy (or, `Within`, after the wait).
    async fn take(
        &self,
        name: &LockName,
        patience: Patience,
    ) -> Result<Option<ReentrantGuard>, LockError> {
        // declared first, so it runs last — after the slot below is dropped — however
        // this ends: taken, busy, failed or cancelled
        let _tidy = Tidy { scope: self, name };
        let slot = Arc::clone(
            self.slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(name.clone())
                .or_default(),
        );
        let started = Instant::now();
        // first acquisitions of a name in one scope go one at a time: the second nests
        let mut current = match patience {
            Patience::Now => match slot.current.try_lock() {
                Ok(current) => current,
                Err(_) => return Ok(None),
            },
            Patience::Within(wait) => match tokio::time::timeout(wait, slot.current.lock()).await {
                Ok(current) => current,
                Err(_) => return Ok(None),
            },
        };
        if let Some(nest) = current.upgrade() {
            let mut hold = nest.hold.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(guard) = hold.guard.as_ref() {
                // not only a loss the watchdog reported: a lease past valid_until too
                if !guard.is_held() {
                    return Err(crate::locker::ended(guard, name));
                }
                hold.count += 1;
                drop(hold);
                return Ok(Some(self.nested(nest, name)));
            }
        }
        let guard = match patience {
            Patience::Now => self.locker.try_lock(name).await?,
            Patience::Within(wait) => {
                let left = wait.saturating_sub(started.elapsed());
                Some(self.locker.lock_within(name, left).await?)
            }
        };
        let Some(guard) = guard else {
            return Ok(None);
        };
        let nest = Arc::new(Nest {
            token: guard.token(),
            hold: Mutex::new(Hold {
                guard: Some(guard),
                count: 1,
            }),
        });
        *current = Arc::downgrade(&nest);
        Ok(Some(self.nested(nest, name)))
    }

    fn nested(&self, nest: Arc<Nest>, name: &LockName) -> ReentrantGuard {
        ReentrantGuard {
            nest: Some(nest),
            scope: self.clone(),
            name: name.clone(),
        }
    }

    /// Forgets `name`'s slot once no guard and no acquisition uses it (acquisitions
    /// clone the slot under the map's mutex, so the count read here is exact).
    fn tidy(&self, name: &LockName) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get(name)
            && Arc::strong_count(slot) == 1
            && slot
                .current
                .try_lock()
                .is_ok_and(|current| current.strong_count() == 0)
        {
            slots.remove(name);
        }
    }

    /// How many names this scope holds or is taking.
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// `true` when the scope holds and is taking nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for Reentrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reentrant")
            .field("names", &self.len())
            .finish_non_exhaustive()
    }
}

mod guard;
#[cfg(test)]
mod tests;

pub use guard::ReentrantGuard;
