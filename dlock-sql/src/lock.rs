//! `SqlLock` as a claim backend: the acquisition attempt, the waiting hooks and the
//! `Backend` operations, each a statement (or, with waiters, a queue transaction).

use async_trait::async_trait;
use dlock_core::backend::{
    AttemptRequest, Backend, Claim, ClaimDriver, Claims, Subscription, WaitPolicy, break_claimed,
    resume_held,
};
use dlock_core::{
    Access, Capabilities, FencingToken, Held, HolderValue, Holding, Lease, LockError, LockInfo,
    LockName, OwnerId, Ticket,
};
use tokio::time::Instant;

use crate::store::{Released, Renewal};
use crate::{SqlLock, queue};

/// One statement each way on the uncontended path: acquire is an upsert that takes
/// the row when free (by the database clock) and nobody queues, release an owner- and
/// token-checked `UPDATE` (PostgreSQL: with a `NOTIFY` to observers). A waiter queues
/// (`crate::queue`), and a release that finds waiters grants the lock to the oldest.
#[async_trait]
impl ClaimDriver for SqlLock {
    async fn claim(&self, request: &AttemptRequest<'_>) -> Result<Claim, LockError> {
        if request.access != Access::Exclusive {
            return self.claim_shared(request).await;
        }
        let (name, owner, ttl, waits) = (request.name, request.owner, request.ttl, request.waits);
        self.claim_exclusive(name, owner, ttl, waits).await
    }

    async fn subscribe(&self, request: &AttemptRequest<'_>) -> Option<Subscription> {
        if !self.opts.listen || !self.fifo() {
            // releases announce nothing a waiter that does not queue could take
            // (`fifo=false` on PostgreSQL): it polls
            return None;
        }
        // a queued waiter hears only its own grant
        self.store
            .subscribe(&queue::grant_key(request.owner.as_str()))
            .await
    }

    fn abandon(&self, request: &AttemptRequest<'_>) {
        let (name, access, owner) = (request.name, request.access, request.owner);
        if access == Access::Exclusive {
            self.leave_queue(name, owner);
        } else {
            self.leave_shared_queue(name, access, owner);
        }
    }

    async fn watch(&self, name: &LockName) -> Option<Subscription> {
        if !self.opts.listen {
            return None;
        }
        // observers hear the releases that found nobody queued
        self.store.subscribe(name.as_str()).await
    }

    fn wait_policy(&self) -> WaitPolicy {
        self.wait_policy_now()
    }
}

#[async_trait]
impl Backend for SqlLock {
    type Family = Claims;

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        if lease.access() != Access::Exclusive {
            return self.renew_shared(lease).await;
        }
        let sent = Instant::now();
        let token =
            i64::try_from(lease.token().get()).map_err(|_| LockError::lease_lost(lease.name()))?;
        let renewal = Renewal {
            name: lease.name().as_str().to_owned(),
            owner: lease.owner().as_str().to_owned(),
            token,
            ttl: lease.ttl(),
        };
        // with the other renewals due now: one statement for them all
        if self.renewals.submit(renewal)?.answer().await? {
            Ok(lease.renewed(lease.ttl(), sent))
        } else {
            Err(LockError::lease_lost(lease.name()))
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        if lease.access() != Access::Exclusive {
            return self.release_shared(lease).await;
        }
        let Ok(token) = i64::try_from(lease.token().get()) else {
            return Ok(false);
        };
        let (name, owner) = (lease.name().as_str(), lease.owner().as_str());
        // a lock taken after queueing is likely wanted again: release and grant in one
        // call where the database has one
        let granting = if self.waiting.took_after_queueing(name, owner) {
            self.op("release", || {
                self.store.release_granting(name, owner, token)
            })
            .await?
        } else {
            None
        };
        let released = match granting {
            Some(released) => released,
            None => {
                self.op("release", || self.store.release(name, owner, token))
                    .await?
            }
        };
        match released {
            Released::Yes { queued } => {
                // released either way; a grant that fails is made by the head's next
                // attempt instead (it finds the lock free and itself first)
                if queued && let Err(e) = self.grant_next(lease.name()).await {
                    tracing::warn!(error = %e, lock = %lease.name(), "granting to the next waiter failed");
                }
                Ok(true)
            }
            Released::No => Ok(false),
        }
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let holder = self
            .op("inspect", || self.store.holder(name.as_str()))
            .await?;
        holder
            .map(|h| {
                Ok(LockInfo {
                    owner: OwnerId::from_stored(&h.owner),
                    token: FencingToken::from_signed(h.token, "token in the lock table")?,
                    remaining: h.remaining,
                    proclaimed: h.proclaimed.and_then(|v| HolderValue::new(&v).ok()),
                })
            })
            .transpose()
    }

    async fn proclaim(&self, lease: &Lease, value: &HolderValue) -> Result<(), LockError> {
        dlock_core::backend::proclaimable(self.backend_name(), lease)?;
        let lost = || LockError::lease_lost(lease.name());
        let token = i64::try_from(lease.token().get()).map_err(|_| lost())?;
        let (name, owner) = (lease.name().as_str(), lease.owner().as_str());
        let written = self
            .op("proclaim", || {
                self.store.proclaim(name, owner, token, value.as_str())
            })
            .await?;
        if written {
            return Ok(());
        }
        // nothing changed: not the holder — or (MySQL) the row had this value already
        match Backend::inspect(self, lease.name()).await? {
            Some(h)
                if h.owner == *lease.owner()
                    && h.token == lease.token()
                    && h.proclaimed.as_ref() == Some(value) =>
            {
                Ok(())
            }
            _ => Err(lost()),
        }
    }

    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        self.shared_holders(name, of).await
    }

    fn capabilities(&self) -> Capabilities {
        // Waiters queue FIFO by default only where they hear their grant (PostgreSQL
        // with LISTEN: one waiter woken per release); queued polling waiters
        // (`fifo=true` on MySQL, SQLite) cannot keep the rest of the promise — no
        // other waiter sends a request after a release — so they do not declare it.
        let notify = self.store.kind() == "postgres" && self.opts.listen && self.fifo();
        Capabilities::per_lease()
            .with_fair(notify)
            .with_notify(notify)
            .with_shared(true)
            .with_batched_renewals(true)
    }

    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        resume_held(self, ticket).await
    }

    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        dlock_core::backend::revoke_claimed(self, name, |holder| async move {
            let token = i64::try_from(holder.token.get())
                .map_err(|_| LockError::backend("revoke", "token beyond the table's range"))?;
            let mark = holder.owner.revoked();
            self.op("revoke", || {
                self.store
                    .revoke(name.as_str(), holder.owner.as_str(), token, mark.as_str())
            })
            .await
        })
        .await
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        break_claimed(self, name).await
    }

    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, LockError> {
        self.op("diagnose", || self.store.diagnose()).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        let rows = self.op("list", || self.store.held(prefix)).await?;
        let mut held = Vec::with_capacity(rows.len());
        for (name, h) in rows {
            // a row written by another program under a name dlock would refuse is
            // none of ours
            let Ok(name) = LockName::new(&name) else {
                continue;
            };
            let holder = LockInfo {
                owner: OwnerId::from_stored(&h.owner),
                token: FencingToken::from_signed(h.token, "token in the lock table")?,
                remaining: h.remaining,
                proclaimed: h.proclaimed.and_then(|v| HolderValue::new(&v).ok()),
            };
            // waiters poll; they leave no trace in the table
            held.push(Held::new(name, holder, None));
        }
        held.extend(self.listed_shared(prefix).await?);
        held.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        Ok(held)
    }

    fn backend_name(&self) -> &'static str {
        self.store.kind()
    }
}
