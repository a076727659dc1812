//! Wrappers that forward: the trait's methods a wrapper does not change are written
//! once, here, instead of once per wrapper.
//!
//! A provided method a wrapper forgets to forward answers with the trait's default
//! instead of the wrapped lock's answer — a silent drift. [`delegate_lock!`] writes the
//! forwarding of the methods a wrapper names, so a wrapper's own code is what it
//! changes, and `tests/forwarding.rs` fails when a wrapper leaves one out.
//!
//! [`delegate_lock!`]: crate::delegate_lock

use crate::{DistributedLock, LockError};

/// A lock that wraps another and forwards to it what it does not change itself, with
/// [`delegate_lock!`](crate::delegate_lock).
pub trait Delegating: Send + Sync {
    /// The wrapped lock.
    type Inner: DistributedLock + ?Sized;

    /// The wrapped lock, for the calls that cannot fail here (`capabilities`,
    /// `backend_name`).
    fn delegate(&self) -> &Self::Inner;

    /// The wrapped lock for a forwarded call, or the error the call answers with
    /// instead (a test wrapper's cut link, say). By default [`Delegating::delegate`].
    ///
    /// # Errors
    /// What the wrapper answers instead of forwarding.
    fn reach(&self) -> Result<&Self::Inner, LockError> {
        Ok(self.delegate())
    }
}

/// Writes `impl DistributedLock` for a [`Delegating`] wrapper: the methods in its
/// braces as written there, and each method named in `forward […]` forwarded to
/// [`Delegating::reach`] (the async ones) or [`Delegating::delegate`]. Every method of
/// the trait can be named: `acquire_with`, `renew`, `release`, `release_after`,
/// `inspect`, `holders`, `holder_changed`, `break_holder`, `revoke_holder`,
/// `hand_over`, `resume`, `proclaim`, `list`, `diagnose`, `capabilities`,
/// `backend_name`.
///
/// ```
/// use dlock_core::{Delegating, DistributedLock, Lease, LockError, MemoryLock};
///
/// /// Counts releases, changes nothing else.
/// struct Counting {
///     inner: MemoryLock,
///     releases: std::sync::atomic::AtomicU64,
/// }
///
/// impl Delegating for Counting {
///     type Inner = MemoryLock;
///     fn delegate(&self) -> &MemoryLock {
///         &self.inner
///     }
/// }
///
/// dlock_core::delegate_lock! {
///     impl [] for Counting;
///     forward [acquire_with, renew, release_after, inspect, holders, holder_changed,
///         break_holder, revoke_holder, hand_over, resume, proclaim, list, diagnose,
///         capabilities, backend_name];
///     {
///         async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
///             self.releases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
///             self.inner.release(lease).await
///         }
///     }
/// }
/// ```
#[macro_export]
macro_rules! delegate_lock {
    (
        impl [$($generics:tt)*] for $ty:ty $(where [$($bounds:tt)*])?;
        forward [$($method:ident),* $(,)?];
        { $($own:tt)* }
    ) => {
        $crate::delegate_lock!(@write
            { [$($generics)*] $ty [$($($bounds)*)?] }
            [$($own)*]
            $($method)*
        );
    };
    // every forwarded method is written out before the impl is, so that
    // `async_trait` sees them all as methods, not as a macro call: each name gives its
    // signature to `@async` (forwarded to `reach`) or `@sync` (to `delegate`)
    (@write $head:tt $done:tt acquire_with $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            acquire_with(request: &$crate::Acquisition<'_>) -> Option<$crate::Lease>);
    };
    (@write $head:tt $done:tt renew $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            renew(lease: &$crate::Lease) -> $crate::Lease);
    };
    (@write $head:tt $done:tt release $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*] release(lease: &$crate::Lease) -> bool);
    };
    (@write $head:tt $done:tt release_after $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            release_after(lease: &$crate::Lease, linger: ::std::time::Duration) -> bool);
    };
    (@write $head:tt $done:tt inspect $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            inspect(name: &$crate::LockName) -> Option<$crate::LockInfo>);
    };
    (@write $head:tt $done:tt holders $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            holders(name: &$crate::LockName, of: $crate::Access) -> Vec<$crate::Holding>);
    };
    (@write $head:tt $done:tt holder_changed $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            holder_changed(watch: &$crate::HolderWatch<'_>) -> ());
    };
    (@write $head:tt $done:tt break_holder $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            break_holder(name: &$crate::LockName) -> Option<$crate::LockInfo>);
    };
    (@write $head:tt $done:tt revoke_holder $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            revoke_holder(name: &$crate::LockName) -> Option<$crate::LockInfo>);
    };
    (@write $head:tt $done:tt hand_over $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            hand_over(lease: &$crate::Lease) -> $crate::Ticket);
    };
    (@write $head:tt $done:tt resume $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            resume(ticket: &$crate::Ticket) -> $crate::Lease);
    };
    (@write $head:tt $done:tt proclaim $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*]
            proclaim(lease: &$crate::Lease, value: &$crate::HolderValue) -> ());
    };
    (@write $head:tt $done:tt list $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*] list(prefix: &str) -> Vec<$crate::Held>);
    };
    (@write $head:tt $done:tt diagnose $($rest:ident)*) => {
        $crate::delegate_lock!(@async $head $done [$($rest)*] diagnose() -> Vec<$crate::Finding>);
    };
    (@write $head:tt $done:tt capabilities $($rest:ident)*) => {
        $crate::delegate_lock!(@sync $head $done [$($rest)*] capabilities() -> $crate::Capabilities);
    };
    (@write $head:tt $done:tt backend_name $($rest:ident)*) => {
        $crate::delegate_lock!(@sync $head $done [$($rest)*] backend_name() -> &'static str);
    };
    (@async $head:tt [$($done:tt)*] [$($rest:ident)*]
        $method:ident($($arg:ident: $ty:ty),*) -> $answer:ty) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn $method(&self $(, $arg: $ty)*) -> Result<$answer, $crate::LockError> {
                $crate::DistributedLock::$method($crate::Delegating::reach(self)? $(, $arg)*).await
            }
        ] $($rest)*);
    };
    (@sync $head:tt [$($done:tt)*] [$($rest:ident)*] $method:ident() -> $answer:ty) => {
        $crate::delegate_lock!(@write $head [$($done)*
            fn $method(&self) -> $answer {
                $crate::DistributedLock::$method($crate::Delegating::delegate(self))
            }
        ] $($rest)*);
    };
    (@write { [$($generics:tt)*] $ty:ty [$($bounds:tt)*] } [$($done:tt)*]) => {
        #[$crate::async_trait]
        impl<$($generics)*> $crate::DistributedLock for $ty where $($bounds)* {
            $($done)*
        }
    };
}
