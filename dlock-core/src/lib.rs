//! # dlock-core
//!
//! The contract shared by every dlock backend: the [`DistributedLock`] trait, the
//! [`Lease`] it hands out (TTL, validity deadline, [`FencingToken`]), the typed
//! [`LockError`], the [`Locker`]/[`LockGuard`] layer that renews leases in the
//! background and tells you when one is lost, and [`MemoryLock`], the in-process
//! reference backend.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use dlock_core::{DistributedLock, Locker, MemoryLock};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! // In production this comes from `dlock_any::connect(url)`.
//! let backend: Arc<dyn DistributedLock> = Arc::new(MemoryLock::new());
//! let locker = Locker::new(backend).with_ttl(Duration::from_secs(15));
//!
//! let guard = locker.lock("stock/sku-123").await?;
//! let token = guard.token(); // send it with every write to the protected store
//! assert!(guard.is_held());
//! guard.release().await?;
//! # let _ = token;
//! # Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod access;
mod acquisition;
pub mod backend;
mod backoff;
mod capabilities;
mod cleanup;
mod delegate;
mod doctor;
mod duration;
mod election;
mod error;
mod fallback;
mod fallback_policy;
mod fence;
mod guard;
mod holder_value;
mod holder_watch;
mod idempotent;
mod instrument;
mod lease;
mod lock;
mod lock_arc;
mod lock_bounds;
mod locker;
mod memory;
mod multi;
mod name;
mod process_holder;
mod reentrant;
mod renew_grid;
mod shared;
mod ticket;
mod token;
mod views;

pub use access::{Access, Holding, MAX_PERMITS};
pub use acquisition::Acquisition;
pub use async_trait::async_trait;
pub use backoff::{Backoff, Deadline};
pub use capabilities::{Capabilities, LeaseScope};
pub use cleanup::{pending_cleanups, settle, spawn_cleanup};
pub use delegate::Delegating;
pub use doctor::{
    CLOCK_OFFSET_CRITICAL, CLOCK_OFFSET_WARNING, Finding, Severity, clock_offset, now_ms,
};
pub use duration::{format_duration, parse_duration};
pub use election::{Election, Leader, Leadership, Observer};
pub use error::{BoxError, LockError, redact_url};
pub use fallback::{Connector, FALLBACK_TOTAL, Fallback, FallbackLock};
pub use fence::{Fence, MemoryFence, require_real_token};
pub use guard::{GuardState, HoldPolicy, LockGuard};
pub use holder_value::{HolderValue, MAX_HOLDER_VALUE};
pub use holder_watch::HolderWatch;
pub use idempotent::{Idempotent, MemoryResults, Outcome, ResultStore};
pub use instrument::{Instrumented, names as metric_names};
pub use lease::{BackendData, Held, Lease, LockInfo, drift_margin};
pub use lock::DistributedLock;
pub use lock_bounds::{HOLDER_POLL, MAX_TTL, MIN_TTL, poll_until, validate_ttl, waited};
pub use locker::{DEFAULT_TTL, DEFAULT_WAIT, Locker};
pub use memory::MemoryLock;
pub use multi::MultiGuard;
pub use name::{LockName, MAX_NAME_LEN, ToLockName, canonical_names};
pub use process_holder::ProcessHolder;
pub use reentrant::{Reentrant, ReentrantGuard};
pub use shared::{Coordination, DistributedRwLock, DistributedSemaphore};
pub use ticket::Ticket;
pub use token::{FencingToken, OwnerId, random_u64};
pub use views::{SharedLock, ViewedBackend};
