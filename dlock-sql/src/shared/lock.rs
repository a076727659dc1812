//! `SqlLock`'s semaphore and read-write lock operations over the shared tables.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::backend::{AttemptRequest, Claim};
use dlock_core::{Access, FencingToken, Held, Holding, Lease, LockError, LockName, OwnerId};
use tokio::time::Instant;

use super::{SharedHolder, SharedRequest, SharedTaken, shared_key, shared_key_prefix};
use crate::SqlLock;
use crate::store::Released;

impl SqlLock {
    /// One attempt at a permit, a read or the write lease: one transaction.
    pub(crate) async fn claim_shared(
        &self,
        request: &AttemptRequest<'_>,
    ) -> Result<Claim, LockError> {
        let (access, owner) = (request.access, request.owner);
        // a waiter that does not queue (yet: see `SqlLock::joins_queue`) polls, and a
        // writer's intent keeps readers from starving it
        let waits = request.waits && self.joins_queue(owner);
        let intent = (request.waits && !waits).then(|| self.wait_policy_now().writer_intent());
        let (live, listener) = if waits {
            self.queue_live().await
        } else {
            (Duration::ZERO, (0, String::new()))
        };
        let req = SharedRequest {
            key: shared_key(request.name, access),
            access,
            owner: owner.as_str().to_owned(),
            ttl: request.ttl,
            waits,
            intent,
            live,
            listener,
        };
        let this = self.clone();
        let work = async move { this.op("acquire", || this.store.take_shared(&req)).await };
        let taken = self.queue_op(owner, waits, work).await?;
        if !(request.waits && matches!(taken, SharedTaken::No(_))) {
            let _ = self.forget_waiter(owner); // done waiting
        }
        match taken {
            SharedTaken::Yes(token) => Ok(Claim::Taken(FencingToken::from_signed(
                token,
                "token in the shared table",
            )?)),
            SharedTaken::No(wait) => Ok(Claim::Held(wait)),
            SharedTaken::Mismatch(n) => {
                let asked = match access {
                    Access::Permit(n) => n,
                    _ => 0,
                };
                Err(LockError::permits_mismatch(
                    request.name,
                    u32::try_from(n).unwrap_or(0),
                    asked,
                ))
            }
        }
    }

    pub(crate) async fn renew_shared(&self, lease: &Lease) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let key = shared_key(lease.name(), lease.access());
        let token = signed(lease)?;
        let owner = lease.owner().as_str();
        let renew = || self.store.renew_shared(&key, owner, token, lease.ttl());
        if self.op("renew", renew).await? {
            Ok(lease.renewed(lease.ttl(), sent))
        } else {
            Err(LockError::lease_lost(lease.name()))
        }
    }

    pub(crate) async fn release_shared(&self, lease: &Lease) -> Result<bool, LockError> {
        let Ok(token) = signed(lease) else {
            return Ok(false);
        };
        let key = shared_key(lease.name(), lease.access());
        let owner = lease.owner().as_str();
        let released = self
            .op("release", || self.store.release_shared(&key, owner, token))
            .await?;
        match released {
            Released::Yes { queued } => {
                // released either way; a grant that fails is made by the next
                // waiter's attempt instead
                if queued
                    && let Err(e) = self
                        .op("grant", || self.store.grant_next_shared(&key, None))
                        .await
                {
                    tracing::warn!(error = %e, lock = %lease.name(), "granting to the next waiter failed");
                }
                Ok(true)
            }
            Released::No => Ok(false),
        }
    }

    /// `owner` stopped waiting for `name`'s `access` without it: leaves the queue, in
    /// the background, giving back a grant it never took.
    pub(crate) fn leave_shared_queue(&self, name: &LockName, access: Access, owner: &OwnerId) {
        let serial = self.forget_waiter(owner);
        let (this, key, owner) = (
            self.clone(),
            shared_key(name, access),
            owner.as_str().to_owned(),
        );
        // a clean-up: a program about to exit lets it end (`dlock_core::settle`);
        // outside a runtime nothing runs, and the entry's deadline drops it. After the
        // acquisition's transaction in flight, if any (see `crate::waiting`).
        dlock_core::spawn_cleanup(async move {
            let _serial = match &serial {
                Some(s) => Some(Arc::clone(s).lock_owned().await),
                None => None,
            };
            let leave = || this.store.grant_next_shared(&key, Some(&owner));
            if let Err(e) = this.op("leave the queue", leave).await {
                tracing::debug!(error = %e, "leaving the queue failed; its deadline drops it");
            }
        });
    }

    pub(crate) async fn shared_holders(
        &self,
        name: &LockName,
        of: Access,
    ) -> Result<Vec<Holding>, LockError> {
        let key = shared_key(name, of);
        let rows = self
            .op("holders", || self.store.holders_shared(&key))
            .await?;
        rows.into_iter().map(holding).collect()
    }

    /// Every holder of a semaphore or read-write lock whose name starts with `prefix`,
    /// by name, oldest grant first.
    pub(crate) async fn listed_shared(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        let (sem, rw) = (
            shared_key_prefix(prefix, Access::Permit(1)),
            shared_key_prefix(prefix, Access::Read),
        );
        let rows = self
            .op("list", || self.store.listed_shared([&sem, &rw]))
            .await?;
        let mut held = Vec::with_capacity(rows.len());
        for (key, h) in rows {
            // a row written by another program under a name dlock would refuse is
            // none of ours
            let Some(Ok(name)) = key.split_once(':').map(|(_, n)| LockName::new(n)) else {
                continue;
            };
            held.push(Held::shared(name, holding(h)?));
        }
        Ok(held)
    }
}

fn holding(h: SharedHolder) -> Result<Holding, LockError> {
    let access = match h.access.as_str() {
        "w" => Access::Write,
        "r" => Access::Read,
        _ => Access::Permit(u32::try_from(h.permits).unwrap_or(0)),
    };
    Ok(Holding::new(
        access,
        OwnerId::from_stored(&h.owner),
        FencingToken::from_signed(h.token, "token in the shared table")?,
        Duration::from_millis(u64::try_from(h.remaining_ms).unwrap_or(0)),
    ))
}

fn signed(lease: &Lease) -> Result<i64, LockError> {
    i64::try_from(lease.token().get()).map_err(|_| LockError::lease_lost(lease.name()))
}
