//! Using the token: a fence keeps, per resource, the highest fencing token that has
//! written there, and refuses a write carrying a lower one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::{FencingToken, LockError};

/// A store's guard against stale lock holders: `check_and_raise` admits a token at
/// least as high as every token admitted before on the same resource, and records it.
///
/// A fence only protects what commits *together with* its check: the SQL fences of
/// `dlock-sql` run inside the caller's transaction, the Redis ones write the value in
/// the same script, etcd's and ZooKeeper's guard the caller's own transaction. A fence
/// checked in one request and a write sent in another leaves a gap between them.
///
/// ```
/// use dlock_core::{Fence, FencingToken, LockError, MemoryFence};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let fence = MemoryFence::new();
/// fence.check_and_raise("invoice/7", FencingToken::new(8)).await.unwrap();
/// fence.check_and_raise("invoice/7", FencingToken::new(8)).await.unwrap(); // same holder
/// let late = fence.check_and_raise("invoice/7", FencingToken::new(5)).await;
/// assert!(matches!(late, Err(LockError::StaleToken { seen: Some(8), offered: 5, .. })));
/// // token 0 (a fallback's lease) passes no fence, even a fresh one
/// assert!(fence.check_and_raise("invoice/8", FencingToken::new(0)).await.is_err());
/// # }
/// ```
#[async_trait]
pub trait Fence: Send + Sync {
    /// Admits `token` on `resource` if no higher token was admitted there, and raises
    /// the resource's mark to it.
    ///
    /// # Errors
    /// [`LockError::StaleToken`] when a higher token was admitted; a backend error.
    ///
    /// # Cancel safety
    /// Dropping it after the request was sent may or may not have raised the mark;
    /// raising it again with the same token is harmless.
    async fn check_and_raise(&self, resource: &str, token: FencingToken) -> Result<(), LockError>;
}

/// Refuses token 0 on `resource`: no lock service grants it — a
/// [`crate::FallbackLock`]'s leases carry it precisely so that every fence refuses
/// them. Every fence and result store in dlock calls this first.
///
/// # Errors
/// [`LockError::StaleToken`] for token 0.
pub fn require_real_token(resource: &str, token: FencingToken) -> Result<(), LockError> {
    if token.get() == 0 {
        return Err(LockError::stale_token(resource, None, token));
    }
    Ok(())
}

/// A fence in this process's memory: for tests, and as the pattern to copy.
#[derive(Clone, Default)]
pub struct MemoryFence {
    marks: Arc<Mutex<HashMap<String, u64>>>,
}

impl MemoryFence {
    /// An empty fence.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Fence for MemoryFence {
    async fn check_and_raise(&self, resource: &str, token: FencingToken) -> Result<(), LockError> {
        require_real_token(resource, token)?;
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        let mark = marks.entry(resource.to_owned()).or_insert(0);
        if token.get() < *mark {
            return Err(LockError::stale_token(resource, Some(*mark), token));
        }
        *mark = token.get();
        Ok(())
    }
}
