//! A resource protected by fencing tokens, for workloads.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use dlock_core::FencingToken;

/// An in-memory record that accepts a write only if its fencing token is at least the
/// highest one seen, and detects overlapping critical sections.
///
/// ```
/// use dlock_conformance::FencedCounter;
/// use dlock_core::FencingToken;
/// let c = FencedCounter::default();
/// assert!(c.write(FencingToken::new(2), 1));
/// assert!(!c.write(FencingToken::new(1), 2)); // stale token rejected
/// assert_eq!(c.value(), 1);
/// ```
#[derive(Debug, Default)]
pub struct FencedCounter {
    state: Mutex<(u64, u64)>, // (value, highest token accepted)
    inside: AtomicBool,
    overlaps: AtomicU64,
    rejected: AtomicU64,
}

impl FencedCounter {
    /// Marks the start of a critical section; counts an overlap if one is running.
    pub fn enter(&self) {
        if self.inside.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Marks the end of a critical section.
    pub fn leave(&self) {
        self.inside.store(false, Ordering::SeqCst);
    }

    /// The current value.
    pub fn value(&self) -> u64 {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    /// Writes `value` if `token` is not older than the newest accepted one.
    pub fn write(&self, token: FencingToken, value: u64) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if token.get() < s.1 {
            self.rejected.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        *s = (value, token.get());
        true
    }

    /// How many critical sections overlapped.
    pub fn overlaps(&self) -> u64 {
        self.overlaps.load(Ordering::SeqCst)
    }

    /// How many writes the fence rejected.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::SeqCst)
    }
}
