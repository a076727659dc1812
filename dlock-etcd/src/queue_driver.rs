//! Acquiring on etcd: the queue driver core's waiting loop runs.

use async_trait::async_trait;
use dlock_core::backend::queue::{QueueDriver, Turn};
use dlock_core::backend::{AttemptRequest, Standing};
use dlock_core::{Access, Lease, LockError, LockInfo, LockName};
use etcd_client::KeyValue;
use tokio::time::Instant;

use crate::EtcdLock;
use crate::queue::{EtcdEntry, gets};
use crate::shared::stand;

/// Uncontended, `acquire` is one txn (create our key if the queue is empty, else queue
/// it and read the head) on a lease already at hand; release is one delete. A waiter
/// watches the key right before its own and keeps its key alive with the shared lease.
#[async_trait]
impl QueueDriver for EtcdLock {
    type Entry = EtcdEntry;

    async fn try_take(&self, request: &AttemptRequest<'_>) -> Result<Option<Lease>, LockError> {
        let (name, access, owner, ttl) = (request.name, request.access, request.owner, request.ttl);
        let (dir, key, ticket, pending) = self.prepare(name, access, owner, ttl).await?;
        if access != Access::Exclusive {
            let (rev, ahead) = self
                .join_shared(name, &dir, &key, access, ticket.id)
                .await?;
            let here = stand(name, access, &ahead);
            if matches!(here, Ok((Standing::Holds, _))) {
                let lease = self
                    .hand_out(name, owner.clone(), &key, rev, ticket)
                    .await?;
                pending.disarm();
                return Ok(Some(lease.with_access(access)));
            }
            // refused (or asked with another permit count): leave nothing queued; a
            // failed delete is left to the key's cleanup
            if self.withdraw(&key).await.is_ok() {
                pending.never_created();
            }
            return here.map(|_| None);
        }
        let (resp, first_attempt) = self.take_if_free(&dir, &key, ticket.id).await?;
        let my_rev = if resp.succeeded() {
            resp.header().map_or(0, |h| h.revision())
        } else {
            // our own put may have landed before a lost reply: then we are first in line
            let g = gets(&resp);
            let mine = g
                .first()
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision);
            let first = g
                .get(1)
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision);
            match (mine, first) {
                (Some(m), Some(f)) if m == f => m,
                // busy, and the only attempt did not write our key
                (None, _) if first_attempt => {
                    pending.never_created();
                    return Ok(None);
                }
                // busy after a retry: an earlier attempt might still land, so the key is
                // deleted now and swept again later
                // or queued behind someone after a lost reply: deleted now and later
                _ => return Ok(None),
            }
        };
        let lease = self
            .hand_out(name, owner.clone(), &key, my_rev, ticket)
            .await?;
        pending.disarm();
        Ok(Some(lease))
    }

    async fn enqueue(&self, request: &AttemptRequest<'_>) -> Result<(EtcdEntry, Turn), LockError> {
        let (name, access, owner, ttl) = (request.name, request.access, request.owner, request.ttl);
        let (dir, key, ticket, pending) = self.prepare(name, access, owner, ttl).await?;
        let entry = |rev| EtcdEntry {
            name: name.clone(),
            access,
            owner: owner.clone(),
            dir: dir.clone(),
            key: key.clone(),
            ticket,
            rev,
            pending: None,
        };
        if access != Access::Exclusive {
            let (rev, ahead) = self
                .join_shared(name, &dir, &key, access, ticket.id)
                .await?;
            self.leases
                .confirm(ticket.id, &key, rev, Instant::now() + ticket.granted);
            let turn = match stand(name, access, &ahead) {
                Ok((Standing::Holds, _)) => Turn::Head,
                Ok((Standing::Waits(_), _)) => Turn::Behind,
                Err(e) => {
                    // refused (another permit count): leave the queue before answering,
                    // so the next caller does not meet this key
                    if self.withdraw(&key).await.is_ok() {
                        pending.never_created();
                    }
                    return Err(e);
                }
            };
            let entry = EtcdEntry {
                pending: Some(pending),
                ..entry(rev)
            };
            return Ok((entry, turn));
        }
        let queued = self.join_queue(name, &dir, &key, ticket.id).await?;
        // a waiter's key is confirmed, so the sweeper and the attachment checks track it
        self.leases.confirm(
            ticket.id,
            &key,
            queued.revision,
            Instant::now() + ticket.granted,
        );
        let turn = if queued.head == Some(queued.revision) {
            Turn::Head
        } else {
            Turn::Behind
        };
        let entry = EtcdEntry {
            pending: Some(pending),
            ..entry(queued.revision)
        };
        Ok((entry, turn))
    }

    async fn next_turn(&self, e: &mut EtcdEntry, until: Instant) -> Result<Turn, LockError> {
        if e.access != Access::Exclusive {
            return self.next_shared_turn(e, until).await;
        }
        let at_head = |head: Option<KeyValue>| {
            if head.map(|kv| kv.create_revision()) == Some(e.rev) {
                Turn::Head
            } else {
                Turn::Behind
            }
        };
        let ahead = self.ahead(&e.dir, e.rev).await?;
        let Some(pred) = ahead.keys.first() else {
            // Nothing queued before us any more: we are the head now, or our key is
            // gone (deleted behind our back, or swept after a pause) — then looking
            // again would find the same thing until the wait runs out.
            return match at_head(self.first_in_queue(&e.dir).await?) {
                Turn::Head => Ok(Turn::Head),
                Turn::Behind => Err(LockError::transient(format!(
                    "the queued request for {} vanished while waiting",
                    e.name
                ))),
            };
        };
        let (id, granted) = (e.ticket.id, e.ticket.granted);
        let keep = || self.keep_key(id, &e.key, e.rev, granted);
        let watched = self
            .wait_for_delete(pred, ahead.read_at, granted / 3, keep, until)
            .await?;
        if watched.is_some_and(|w| ahead.all_gone(&w)) {
            // every key that was ahead is gone and none can join ahead: our turn,
            // without reading the queue again
            return Ok(Turn::Head);
        }
        Ok(at_head(self.first_in_queue(&e.dir).await?))
    }

    async fn grant(&self, e: &mut EtcdEntry, waited: bool) -> Result<Option<Lease>, LockError> {
        // After waiting, make sure our key (and so our place) still exists
        // (etcd#11456) — unless the client knows it does: still ours, on a lease
        // that cannot have expired since its last refresh.
        if waited
            && !self.surely_alive(e.ticket.id, &e.key, e.rev)
            && !self.key_has_revision(&e.key, e.rev).await?
        {
            return Err(LockError::transient(format!(
                "the queued request for {} expired while waiting",
                e.name
            )));
        }
        let lease = self
            .hand_out(&e.name, e.owner.clone(), &e.key, e.rev, e.ticket)
            .await?
            .with_access(e.access);
        if let Some(p) = e.pending.take() {
            p.disarm();
        }
        Ok(Some(lease))
    }

    async fn holder_gone(
        &self,
        name: &LockName,
        holder: &LockInfo,
        until: Instant,
    ) -> Result<(), LockError> {
        self.wait_holder_gone(name, holder, until).await
    }
}
