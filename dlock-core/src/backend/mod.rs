//! The toolkit adapters are built from; not needed to *use* a lock.
//!
//! - the claim family's algorithm ([`claim`], [`ClaimDriver`]) and the waiting loop
//!   under it ([`wait_for_lock`], [`Attempt`], [`Subscription`], [`WaitPolicy`]);
//! - the queue family's algorithm ([`queue`], [`QueueDriver`]);
//! - grant messages a release sends a queued waiter, taken as the lock when that is
//!   safe ([`grants`]);
//! - the retry rule for transient errors ([`retry_transient`]);
//! - one time limit per request ([`within`]), renewal batching ([`Batcher`]),
//!   wake-up fan-out ([`WakeupHub`]), dlock's URL parameters ([`take_query`]) and
//!   durations as server integers ([`millis`], [`micros`]).
//!
//! A new backend implements [`Backend`] and one family's driver; core's blanket
//! implementation makes it a [`crate::DistributedLock`] ([`family`]), so that the rules
//! the trait states once are kept once (see ARCHITECTURE.md).

pub mod claim;
pub mod family;
pub mod grants;
pub mod queue;
mod reach;
mod request;

mod batch;
mod operators;
mod query;
mod standing;
mod task;
mod timeout;
mod units;
mod wait;
mod wakeups;

pub use batch::{Batcher, Pending, gather_batch};
pub use claim::{Claim, ClaimDriver};
pub use family::{Backend, Claims, Family, Queues};
pub use operators::{break_claimed, proclaimable, resume_held, revoke_claimed};
pub use query::{credentials, take_query};
pub use queue::{QueueDriver, Turn};
pub use reach::any_reachable;
pub use request::AttemptRequest;
pub use standing::{Standing, holds, standing};
pub use task::OwnedTask;
pub use timeout::{Answered, retry_within, within};
pub use units::{from_millis, micros, millis, millis_u64};
pub use wait::{Attempt, Subscription, WaitPolicy, retry_transient, wait_for_lock};
pub use wakeups::WakeupHub;

/// What every acquisition starts with: the TTL checked (`InvalidArgument` when out of
/// range) and a fresh owner id, unique to this acquisition, carrying the holder's
/// `value` if it gave one.
///
/// # Errors
/// `InvalidArgument` for a TTL out of range; `Unavailable` when the system has no
/// randomness to give.
pub fn new_acquisition(
    ttl: std::time::Duration,
    value: Option<&crate::HolderValue>,
) -> Result<crate::OwnerId, crate::LockError> {
    crate::validate_ttl(ttl)?;
    crate::OwnerId::random_with_value(value)
}
