//! `Arc<T>` is a `DistributedLock` when `T` is: every method forwarded.

use crate::{Delegating, DistributedLock};

impl<T: DistributedLock + ?Sized> Delegating for std::sync::Arc<T> {
    type Inner = T;

    fn delegate(&self) -> &T {
        self
    }
}

// A shared backend is a backend, so `Instrumented<Arc<dyn DistributedLock>>` works.
// Every method forwards: a provided one left out would answer with its default
// (`tests/forwarding.rs` checks the set).
crate::delegate_lock! {
    impl [T: DistributedLock + ?Sized] for std::sync::Arc<T>;
    forward [acquire_with, renew, release, release_after, inspect, holders, holder_changed,
        break_holder, revoke_holder, hand_over, resume, proclaim, list, diagnose, capabilities,
        backend_name];
    {}
}
