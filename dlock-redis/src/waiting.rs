//! A [`RedisLock`] attempt and wait: queued on the server when it waits, granted by a
//! release (`queue.rs`), the grant taken from its own channel (`dlock_core::backend::grants`), and the
//! queue left when the wait ends without the lock.

use std::sync::Arc;

use dlock_core::backend::grants::fresh_for;
use dlock_core::backend::{AttemptRequest, Claim, Subscription};
use dlock_core::{Access, LockError, LockName, OwnerId};
use tokio::time::Instant;

use crate::keys::Keys;
use crate::lock::RedisLock;
use crate::node::Node;
use crate::queue::Queueing;
use crate::shared::{SharedAttempt, SharedKeys};

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

    /// Whether its waiters queue (not an exclusive lock in the plain layout).
    fn queues(&self) -> bool {
        match self {
            Self::Exclusive(keys) => keys.fifo,
            Self::Shared(..) => true,
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

impl RedisLock {
    /// One attempt (see `ClaimDriver::claim`); a waiting one takes a grant the release
    /// already sent it, or queues.
    pub(crate) async fn attempt(&self, request: &AttemptRequest<'_>) -> Result<Claim, LockError> {
        let (owner, ttl, waits) = (request.owner.as_str(), request.ttl, request.waits);
        let target = Target::new(self, request.name, request.access)?;
        let channel = target.grant_channel(owner);
        let grants = self.node.grants();
        if waits && let Some(granted) = grants.take(&channel, fresh_for(ttl)) {
            return Ok(granted);
        }
        let queueing = (waits && target.queues()).then(|| self.queueing(&channel));
        let sent = Instant::now();
        let answer = match &target {
            Target::Exclusive(keys) => self.node.claim(keys, owner, ttl, queueing).await?,
            Target::Shared(keys, _) => {
                let attempt = SharedAttempt {
                    name: request.name,
                    access: request.access,
                    owner,
                    ttl,
                    queueing,
                };
                self.node.claim_shared(keys, &attempt).await?
            }
        };
        grants.answered(&channel, sent, &answer);
        Ok(answer.claim)
    }

    /// How a waiter on `channel` queues. One that listens there stays queued three of
    /// the longest gaps between its attempts; one that does not (its first attempt, or
    /// a waiter whose subscription failed and who polls) ten of its polling gaps at the
    /// slowest — a waiter gone without leaving is skipped that soon.
    fn queueing(&self, channel: &str) -> Queueing {
        let listening = self.node.grants().is_open(channel);
        let policy = &self.opts.policy;
        Queueing {
            live: if listening {
                policy.writer_intent()
            } else {
                policy.poll_max * 10
            },
            listening,
        }
    }

    /// Listens for `owner`'s grant on its own channel.
    pub(crate) async fn listen_for_grant(
        &self,
        name: &LockName,
        access: Access,
        owner: &OwnerId,
    ) -> Result<Subscription, LockError> {
        let target = Target::new(self, name, access)?;
        if !target.queues() {
            // the plain layout: woken by releases, as Redlock's waiters are
            return self
                .node
                .subscribe(&Keys::new(&self.opts, name).channel)
                .await;
        }
        let channel = target.grant_channel(owner.as_str());
        self.node.subscribe_grant(&channel).await
    }

    /// `owner` stopped waiting without the lock: leaves the queue, in the background (a
    /// drop cannot wait), giving back a grant it never took.
    pub(crate) fn leave_queue(&self, name: &LockName, access: Access, owner: &OwnerId) {
        let Ok(target) = Target::new(self, name, access) else {
            return; // a name refused before anything was queued
        };
        if !target.queues() {
            return;
        }
        let (node, owner) = (Arc::clone(&self.node), owner.as_str().to_owned());
        // a clean-up: a program about to exit lets it end (`dlock_core::settle`);
        // outside a runtime nothing runs, and the entry's deadline drops it
        dlock_core::spawn_cleanup(async move {
            if let Err(e) = target.leave(&node, &owner).await {
                tracing::debug!(error = %e, "leaving the queue failed; its deadline drops it");
            }
        });
    }
}
