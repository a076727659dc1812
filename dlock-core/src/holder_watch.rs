//! What [`crate::DistributedLock::holder_changed`] waits for, described whole, so a
//! wrapper passes it on as one value.

use tokio::time::Instant;

use crate::{LockInfo, LockName};

/// A wait for `name`'s holder to change from `seen` (released, expired, replaced, or
/// one appeared where `seen` is `None`), ending at `until` at the latest.
///
/// ```
/// use dlock_core::{HolderWatch, LockName};
/// use tokio::time::{Duration, Instant};
///
/// let name = LockName::new("jobs/nightly").unwrap();
/// let watch = HolderWatch::new(&name, None, Instant::now() + Duration::from_secs(5));
/// assert_eq!(watch.name.as_str(), "jobs/nightly");
/// assert!(watch.seen.is_none());
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct HolderWatch<'a> {
    /// The lock watched.
    pub name: &'a LockName,
    /// The holder the caller last saw (`None`: none).
    pub seen: Option<&'a LockInfo>,
    /// When the wait ends even without a change.
    pub until: Instant,
}

impl<'a> HolderWatch<'a> {
    /// A wait for `name`'s holder to differ from `seen`, until `until`.
    #[must_use]
    pub fn new(name: &'a LockName, seen: Option<&'a LockInfo>, until: Instant) -> Self {
        Self { name, seen, until }
    }
}
