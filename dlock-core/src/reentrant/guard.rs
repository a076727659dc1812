//! A nested guard of a [`Reentrant`] scope.

use std::future::Future;
use std::sync::{Arc, PoisonError};

use super::{Nest, Reentrant, Tidy};
use crate::{FencingToken, GuardState, Lease, LockError, LockGuard, LockName};

/// One level of a [`Reentrant`] scope's hold: it shares the lease with every other
/// guard of the same name in the scope, and the backend's lock is released when the
/// last of them is released or dropped.
pub struct ReentrantGuard {
    pub(super) nest: Option<Arc<Nest>>,
    pub(super) scope: Reentrant,
    pub(super) name: LockName,
}

impl ReentrantGuard {
    fn with_guard<T>(&self, read: impl FnOnce(&LockGuard) -> T, otherwise: T) -> T {
        let Some(nest) = &self.nest else {
            return otherwise;
        };
        let hold = nest.hold.lock().unwrap_or_else(PoisonError::into_inner);
        hold.guard.as_ref().map_or(otherwise, read)
    }

    /// The fencing token of the shared lease (the same at every level).
    #[must_use]
    pub fn token(&self) -> FencingToken {
        self.nest
            .as_ref()
            .map_or(FencingToken::new(0), |nest| nest.token)
    }

    /// The shared lease, as last renewed.
    #[must_use]
    pub fn lease(&self) -> Option<Lease> {
        self.with_guard(|g| Some(g.lease()), None)
    }

    /// The shared guard's state.
    #[must_use]
    pub fn state(&self) -> GuardState {
        self.with_guard(LockGuard::state, GuardState::Released)
    }

    /// `true` while the shared lease is certainly valid ([`LockGuard::is_held`]).
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.with_guard(LockGuard::is_held, false)
    }

    /// How many guards of this scope share the hold now (1 for the outermost alone).
    #[must_use]
    pub fn hold_count(&self) -> usize {
        self.nest.as_ref().map_or(0, |nest| {
            nest.hold
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .count
        })
    }

    /// Completes when the shared lease is lost or reaches its hold cap
    /// ([`LockGuard::lost`]): every level sees the same loss.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + use<> {
        let lost = self.with_guard(|g| Some(g.lost()), None);
        async move {
            match lost {
                Some(lost) => lost.await,
                None => std::future::pending().await,
            }
        }
    }

    /// Leaves this level. The outermost release (the last guard of the name in the
    /// scope) releases the backend's lock and returns its answer; an inner one returns
    /// whether the shared lease is still held.
    ///
    /// # Errors
    /// The backend's release error, for the last guard only.
    ///
    /// # Cancel safety
    /// As [`LockGuard::release`] for the last guard; an inner release is done before
    /// its first await.
    pub async fn release(mut self) -> Result<bool, LockError> {
        match self.leave() {
            Leave::Last(guard) => {
                let _tidy = Tidy {
                    scope: &self.scope,
                    name: &self.name,
                };
                guard.release().await
            }
            Leave::Nested(held) => Ok(held),
        }
    }

    /// Drops this level's count; the guard to release when it was the last.
    fn leave(&mut self) -> Leave {
        let Some(nest) = self.nest.take() else {
            return Leave::Nested(false);
        };
        let mut hold = nest.hold.lock().unwrap_or_else(PoisonError::into_inner);
        hold.count = hold.count.saturating_sub(1);
        if hold.count > 0 {
            return Leave::Nested(hold.guard.as_ref().is_some_and(LockGuard::is_held));
        }
        match hold.guard.take() {
            Some(guard) => Leave::Last(guard),
            None => Leave::Nested(false),
        }
    }
}

enum Leave {
    Last(LockGuard),
    Nested(bool),
}

impl Drop for ReentrantGuard {
    fn drop(&mut self) {
        if let Leave::Last(guard) = self.leave() {
            drop(guard); // its own Drop releases in the background
            self.scope.tidy(&self.name);
        }
    }
}

impl std::fmt::Debug for ReentrantGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReentrantGuard")
            .field("name", &self.name)
            .field("token", &self.token())
            .field("hold_count", &self.hold_count())
            .finish_non_exhaustive()
    }
}
