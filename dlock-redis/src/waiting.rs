//! A [`RedisLock`] attempt and wait: queued on the server when it waits, granted by a
//! release (`queue.rs`), the grant taken from its own channel (`grants.rs`), and the
//! queue left when the wait ends without the lock.

use std::sync::{Arc, Weak};
use std::time::Duration;

use dlock_core::backend::{Claim, Subscription};
use dlock_core::{Access, LockError, LockName, OwnerId};
use tokio::time::Instant;

use crate::keys::Keys;
use crate::node::Node;
use crate::queue::Queueing;
use crate::shared::{SharedAttempt, SharedKeys};
use crate::single::RedisLock;

/// Where an acquisition of one access to one name lives.
#[derive(Clone)]
enum Target {
    Exclusive(Keys),
    Shared(SharedKeys, Access),
}

impl Target {
    fn new(lock: &RedisLock, name: &LockName, access: Access) -> Result<Self, LockError> {
        Ok(if access == Access::Exclusive {
            Self::Exclusive(Keys::for_acquire(&lock.opts, name)?)
        } else {
            Self::Shared(SharedKeys::new(&lock.opts.prefix, name, access), access)
        })
    }

    fn grant_channel(&self, owner: &str) -> String {
        match self {
            Self::Exclusive(keys) => keys.grant_channel(owner),
            Self::Shared(keys, _) => keys.grant_channel(owner),
        }
    }

    /// Leaves the queue, giving back a grant never taken.
    async fn leave(&self, node: &Node, owner: &str) -> Result<(), LockError> {
        match self {
            Self::Exclusive(keys) => node.release(keys, owner).await.map(drop),
            Self::Shared(keys, access) => node.leave_shared(keys, *access, owner).await,
        }
    }
}

/// How much of its TTL a grant must still have, counted from the attempt it is dated
/// by, to be taken from the message alone (else the next attempt confirms it on the
/// server, refreshing its TTL).
fn fresh_for(ttl: Duration) -> Duration {
    ttl * 2 / 3
}

impl RedisLock {
    /// One attempt (see `ClaimDriver::claim`); a waiting one takes a grant the release
    /// already sent it, or queues.
    pub(crate) async fn attempt(
        &self,
        name: &LockName,
        access: Access,
        owner: &OwnerId,
        ttl: Duration,
        waits: bool,
    ) -> Result<Claim, LockError> {
        let target = Target::new(self, name, access)?;
        let channel = target.grant_channel(owner.as_str());
        let grants = self.node.grants();
        if waits && let Some(granted) = grants.take(&channel, fresh_for(ttl)) {
            return Ok(granted);
        }
        // an entry lives three of the longest gaps between a waiter's attempts
        let queueing = waits.then(|| Queueing {
            live: self.opts.policy.writer_intent(),
            listening: grants.is_open(&channel),
        });
        let sent = Instant::now();
        let answer = match &target {
            Target::Exclusive(keys) => self.node.claim(keys, owner.as_str(), ttl, queueing).await?,
            Target::Shared(keys, _) => {
                let attempt = SharedAttempt {
                    name,
                    access,
                    owner: owner.as_str(),
                    ttl,
                    queueing,
                };
                self.node.claim_shared(keys, &attempt).await?
            }
        };
        grants.answered(&channel, sent, &answer);
        Ok(answer.claim)
    }

    /// Listens for `owner`'s grant on its own channel; dropped without the lock, it
    /// leaves the queue (in the background: a drop cannot wait).
    pub(crate) async fn listen_for_grant(
        &self,
        name: &LockName,
        access: Access,
        owner: &OwnerId,
    ) -> Result<Subscription, LockError> {
        let target = Target::new(self, name, access)?;
        let channel = target.grant_channel(owner.as_str());
        let node: Weak<Node> = Arc::downgrade(&self.node);
        let (owner, ch) = (owner.as_str().to_owned(), channel.clone());
        let leave = move || {
            let Some(node) = node.upgrade() else { return };
            if node.grants().close(&ch) {
                return; // it got the lock: nothing to leave
            }
            let Ok(rt) = tokio::runtime::Handle::try_current() else {
                return; // the waiter's deadline drops it from the queue
            };
            rt.spawn(async move {
                if let Err(e) = target.leave(&node, &owner).await {
                    tracing::debug!(error = %e, "leaving the queue failed; its deadline drops it");
                }
            });
        };
        self.node.subscribe_grant(&channel, Box::new(leave)).await
    }
}
