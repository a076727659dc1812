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
/// `inspect`, `holders`, `holder_changed`, `break_holder`, `hand_over`, `resume`,
/// `proclaim`, `list`, `diagnose`, `capabilities`, `backend_name`.
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
///         break_holder, hand_over, resume, proclaim, list, diagnose, capabilities,
///         backend_name];
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
    // `async_trait` sees them all as methods, not as a macro call
    (@write $head:tt [$($done:tt)*] acquire_with $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn acquire_with(
                &self,
                request: &$crate::Acquisition<'_>,
            ) -> Result<Option<$crate::Lease>, $crate::LockError> {
                $crate::DistributedLock::acquire_with($crate::Delegating::reach(self)?, request).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] renew $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn renew(&self, lease: &$crate::Lease) -> Result<$crate::Lease, $crate::LockError> {
                $crate::DistributedLock::renew($crate::Delegating::reach(self)?, lease).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] release $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn release(&self, lease: &$crate::Lease) -> Result<bool, $crate::LockError> {
                $crate::DistributedLock::release($crate::Delegating::reach(self)?, lease).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] release_after $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn release_after(
                &self,
                lease: &$crate::Lease,
                linger: ::std::time::Duration,
            ) -> Result<bool, $crate::LockError> {
                $crate::DistributedLock::release_after($crate::Delegating::reach(self)?, lease, linger).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] inspect $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn inspect(
                &self,
                name: &$crate::LockName,
            ) -> Result<Option<$crate::LockInfo>, $crate::LockError> {
                $crate::DistributedLock::inspect($crate::Delegating::reach(self)?, name).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] holders $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn holders(
                &self,
                name: &$crate::LockName,
                of: $crate::Access,
            ) -> Result<Vec<$crate::Holding>, $crate::LockError> {
                $crate::DistributedLock::holders($crate::Delegating::reach(self)?, name, of).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] holder_changed $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn holder_changed(
                &self,
                watch: &$crate::HolderWatch<'_>,
            ) -> Result<(), $crate::LockError> {
                $crate::DistributedLock::holder_changed($crate::Delegating::reach(self)?, watch).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] break_holder $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn break_holder(
                &self,
                name: &$crate::LockName,
            ) -> Result<Option<$crate::LockInfo>, $crate::LockError> {
                $crate::DistributedLock::break_holder($crate::Delegating::reach(self)?, name).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] hand_over $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn hand_over(&self, lease: &$crate::Lease) -> Result<$crate::Ticket, $crate::LockError> {
                $crate::DistributedLock::hand_over($crate::Delegating::reach(self)?, lease).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] resume $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn resume(&self, ticket: &$crate::Ticket) -> Result<$crate::Lease, $crate::LockError> {
                $crate::DistributedLock::resume($crate::Delegating::reach(self)?, ticket).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] proclaim $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn proclaim(
                &self,
                lease: &$crate::Lease,
                value: &$crate::HolderValue,
            ) -> Result<(), $crate::LockError> {
                $crate::DistributedLock::proclaim($crate::Delegating::reach(self)?, lease, value).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] list $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn list(&self, prefix: &str) -> Result<Vec<$crate::Held>, $crate::LockError> {
                $crate::DistributedLock::list($crate::Delegating::reach(self)?, prefix).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] diagnose $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            async fn diagnose(&self) -> Result<Vec<$crate::Finding>, $crate::LockError> {
                $crate::DistributedLock::diagnose($crate::Delegating::reach(self)?).await
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] capabilities $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            fn capabilities(&self) -> $crate::Capabilities {
                $crate::DistributedLock::capabilities($crate::Delegating::delegate(self))
            }
        ] $($rest)*);
    };
    (@write $head:tt [$($done:tt)*] backend_name $($rest:ident)*) => {
        $crate::delegate_lock!(@write $head [$($done)*
            fn backend_name(&self) -> &'static str {
                $crate::DistributedLock::backend_name($crate::Delegating::delegate(self))
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
