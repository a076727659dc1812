//! The acquire paths both Redis backends share; they differ only in one attempt and
//! in how they subscribe to release messages.

use std::time::Duration;

use async_trait::async_trait;
use dlock_core::{
    Attempt, Lease, LockError, LockName, OwnerId, Subscription, validate_ttl, wait_for_lock,
};

use crate::keys::Keys;
use crate::options::Options;

/// One backend's attempt and subscription.
#[async_trait]
pub(crate) trait Attempts: Sync {
    fn opts(&self) -> &Options;
    async fn attempt(
        &self,
        name: &LockName,
        keys: &Keys,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<Attempt, LockError>;
    async fn subscribe(&self, keys: &Keys) -> Option<Subscription>;
}

pub(crate) async fn try_acquire<T: Attempts>(
    t: &T,
    name: &LockName,
    ttl: Duration,
) -> Result<Option<Lease>, LockError> {
    validate_ttl(ttl)?;
    let owner = OwnerId::random()?;
    let keys = Keys::new(&t.opts().prefix, name);
    Ok(t.attempt(name, &keys, &owner, ttl).await?.into_lease())
}

pub(crate) async fn acquire<T: Attempts>(
    t: &T,
    name: &LockName,
    ttl: Duration,
    wait: Duration,
) -> Result<Lease, LockError> {
    validate_ttl(ttl)?;
    let owner = OwnerId::random()?;
    let keys = Keys::new(&t.opts().prefix, name);
    wait_for_lock(
        name,
        wait,
        &t.opts().policy,
        || t.attempt(name, &keys, &owner, ttl),
        || t.subscribe(&keys),
    )
    .await
}
