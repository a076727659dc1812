//! A held lock for blocking code.

use std::time::Duration;

use dlock_core::{FencingToken, GuardState, Lease, LockError, LockName};

use super::OnEngine;

/// Runs `work` with `guard`, then releases it; the hold's end as an error when it came
/// first.
pub(super) fn under<T>(
    guard: LockGuard,
    work: impl FnOnce(&LockGuard) -> T,
) -> Result<T, LockError> {
    let out = work(&guard);
    let ended = guard.ended();
    let released = guard.release();
    match ended {
        Some(error) => Err(error),
        None => {
            if let Err(e) = released {
                tracing::warn!(error = %e, "release after with_lock failed; the lease will expire by its TTL");
            }
            Ok(out)
        }
    }
}

/// A held lock for blocking code, renewed in the background on the backend's runtime
/// thread. [`LockGuard::release`] when done; a dropped guard releases in the
/// background (best effort: else the lease expires by its TTL).
pub struct LockGuard {
    pub(super) inner: OnEngine<dlock_core::LockGuard>,
}

impl LockGuard {
    /// The fencing token.
    #[must_use]
    pub fn token(&self) -> FencingToken {
        self.inner
            .get()
            .map_or(FencingToken::new(0), dlock_core::LockGuard::token)
    }

    /// The current lease, as last renewed.
    ///
    /// # Errors
    /// Never while the guard exists.
    pub fn lease(&self) -> Result<Lease, LockError> {
        self.inner.get().map(dlock_core::LockGuard::lease)
    }

    /// The guard's state (held, suspect, lost, expired).
    #[must_use]
    pub fn state(&self) -> GuardState {
        self.inner
            .get()
            .map_or(GuardState::Released, dlock_core::LockGuard::state)
    }

    /// `true` while the lease is certainly valid.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.inner.get().is_ok_and(dlock_core::LockGuard::is_held)
    }

    /// Blocks until the lease is lost (or the hold reaches its cap), or `limit`
    /// passed; whether it was lost. A watcher thread can use it to stop the work.
    #[must_use]
    pub fn wait_lost(&self, limit: Duration) -> bool {
        let Ok(guard) = self.inner.get() else {
            return false;
        };
        let lost = guard.lost();
        self.inner
            .engine
            .run(async move { Ok(tokio::time::timeout(limit, lost).await.is_ok()) })
            .unwrap_or(false)
    }

    /// Stops renewal and releases the lock; `Ok(false)` if it was no longer held.
    ///
    /// # Errors
    /// A backend error; the lease then expires by its TTL.
    pub fn release(mut self) -> Result<bool, LockError> {
        let guard = self.inner.take()?;
        self.inner.engine.run(async move { guard.release().await })
    }

    /// The error `with_lock` answers when the hold ended before the work did.
    fn ended(&self) -> Option<LockError> {
        let guard = self.inner.get().ok()?;
        let name: LockName = guard.lease().name().clone();
        match (guard.state(), guard.policy().max_hold) {
            (GuardState::Expired, Some(max_hold)) => Some(LockError::HoldExpired {
                name: name.to_string(),
                max_hold,
            }),
            (GuardState::Lost | GuardState::Expired, _) => Some(LockError::lease_lost(&name)),
            _ if !guard.is_held() => Some(LockError::lease_lost(&name)),
            _ => None,
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("token", &self.token())
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}
