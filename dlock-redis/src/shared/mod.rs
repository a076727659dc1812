//! Semaphores and read-write locks on one Redis server: a holder set per name, each
//! operation one script.
//!
//! Keys, all under the name's hash tag (one Cluster slot), in a space of their own
//! (`sem` for semaphores, `rw` for read-write locks), so a mutex, a semaphore and a
//! read-write lock of one name never meet:
//! - `PREFIX{name}:<space>` — sorted set of holders, member `<access tag>:<owner>`,
//!   score the lease's expiry in server milliseconds;
//! - `…:<space>:tokens` — hash member → fencing token;
//! - `…:<space>:meta` — hash: `permits` (the count the holders use), `writer` (the
//!   member of the writer holding the lock);
//! - `…:<space>:intent` — sorted set of waiting writers' owner ids, score when the
//!   intent lapses: while one is live, new readers are refused. Earlier versions kept
//!   writers from starving this way; writers now queue (below), and their intents are
//!   only read (and dropped when the writer gets in or leaves);
//! - `…:<space>:fence` — the fencing counter (hybrid clock, as the mutex's); it expires
//!   a counter retention after the last holder released, as the mutex's;
//! - `…:<space>:released` — the channel a release publishes on;
//! - `…:<space>:queue`, `…:<space>:waiters` — the waiters, oldest first (`queue.rs`):
//!   a release admits queued waiters in order while the oldest fits (a writer once the
//!   holders are gone, then the readers behind it together) and tells each on its own
//!   channel, `…:<space>:released:<owner id>`. A new attempt never passes a live queue,
//!   so a reader arriving behind a waiting writer waits (writers do not starve).
//!
//! The holder set, tokens, count and intents expire with the last lease or intent in
//! them, the queue with its last waiter's deadline, so a name whose holders crashed leaves only its counter behind (see `TIDY`).

use std::time::Duration;

use dlock_core::backend::millis_u64;
use dlock_core::{Access, FencingToken, Holding, LockError, LockName, OwnerId};

use crate::keys::escape;
use crate::node::Node;
use crate::queue::Queueing;
use dlock_core::backend::grants::Answer;

mod scripts;
use scripts::{ACQUIRE, HOLDERS, LEAVE, RELEASE, RENEW};

/// The keys of one semaphore or read-write lock.
#[derive(Clone, Debug)]
pub(crate) struct SharedKeys {
    holders: String,
    tokens: String,
    meta: String,
    intent: String,
    fence: String,
    queue: String,
    waiters: String,
    pub channel: String,
}

impl SharedKeys {
    pub(crate) fn new(prefix: &str, name: &LockName, access: Access) -> Self {
        let space = if access.is_rw() { "rw" } else { "sem" };
        let base = format!("{prefix}{{{}}}:{space}", escape(name.as_str()));
        Self {
            tokens: format!("{base}:tokens"),
            meta: format!("{base}:meta"),
            intent: format!("{base}:intent"),
            fence: format!("{base}:fence"),
            channel: format!("{base}:released"),
            queue: format!("{base}:queue"),
            waiters: format!("{base}:waiters"),
            holders: base,
        }
    }

    /// The channel on which `owner`, queued, hears that it was admitted.
    pub(crate) fn grant_channel(&self, owner: &str) -> String {
        format!("{}:{owner}", self.channel)
    }

    fn all(&self) -> [&str; 7] {
        [
            &self.holders,
            &self.tokens,
            &self.meta,
            &self.intent,
            &self.fence,
            &self.queue,
            &self.waiters,
        ]
    }
}

/// A holder's member in the holder set: its access and owner id.
fn member(access: Access, owner: &str) -> String {
    let tag = match access {
        Access::Write => "w",
        Access::Read => "r",
        _ => "p",
    };
    format!("{tag}:{owner}")
}

/// One attempt to take a semaphore's permit, a read or the write lease.
pub(crate) struct SharedAttempt<'a> {
    pub name: &'a LockName,
    pub access: Access,
    pub owner: &'a str,
    pub ttl: Duration,
    /// The caller waits if this fails: it queues (`queue.rs`).
    pub queueing: Option<Queueing>,
}

impl Node {
    /// One attempt to take `a.name` with `a.access` for `a.owner`.
    pub(crate) async fn claim_shared(
        &self,
        keys: &SharedKeys,
        a: &SharedAttempt<'_>,
    ) -> Result<Answer, LockError> {
        let SharedAttempt {
            name,
            access,
            owner,
            ttl,
            queueing,
        } = *a;
        let (kind, permits) = match access {
            Access::Permit(n) => ("p", n),
            Access::Read => ("r", 0),
            _ => ("w", 0),
        };
        let mut call = ACQUIRE.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        call.arg(member(access, owner))
            .arg(millis_u64(ttl))
            .arg(kind)
            .arg(permits)
            .arg(Queueing::mode(queueing))
            .arg(owner)
            .arg(Queueing::live_ms(queueing))
            .arg(&keys.channel)
            .arg(self.conn.publish_command());
        let (status, n, counter): (i64, i64, i64) = self.invoke("acquire", call).await?;
        match status {
            1 => Ok(Answer::taken(FencingToken::from_signed(
                n,
                "fencing counter",
            )?)),
            2 => Err(LockError::permits_mismatch(
                name,
                u32::try_from(n).unwrap_or(0),
                permits,
            )),
            _ => Ok(Answer::held(
                u64::try_from(n).ok().map(Duration::from_millis),
                u64::try_from(counter).unwrap_or(0),
            )),
        }
    }

    /// A waiter of `access` that stops waiting: leaves the queue and gives back a hold
    /// granted to it meanwhile (`LEAVE`).
    pub(crate) async fn leave_shared(
        &self,
        keys: &SharedKeys,
        access: Access,
        owner: &str,
    ) -> Result<(), LockError> {
        let mut call = LEAVE.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        call.arg(member(access, owner))
            .arg(owner)
            .arg(&keys.channel)
            .arg(self.conn.publish_command())
            .arg(millis_u64(self.counter_retention));
        self.invoke::<i64>("leave", call).await.map(drop)
    }

    /// Extends a holder's lease; whether it was still held.
    pub(crate) async fn renew_shared(
        &self,
        keys: &SharedKeys,
        access: Access,
        owner: &str,
        token: FencingToken,
        ttl: Duration,
    ) -> Result<bool, LockError> {
        let mut call = RENEW.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        call.arg(member(access, owner))
            .arg(token.get())
            .arg(millis_u64(ttl));
        Ok(self.invoke::<i64>("renew", call).await? == 1)
    }

    /// Gives a holder's lease back; whether it was still held.
    pub(crate) async fn release_shared(
        &self,
        keys: &SharedKeys,
        access: Access,
        owner: &str,
        token: FencingToken,
    ) -> Result<bool, LockError> {
        let mut call = RELEASE.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        call.arg(member(access, owner))
            .arg(token.get())
            .arg(&keys.channel)
            .arg(self.conn.publish_command())
            .arg(millis_u64(self.counter_retention));
        Ok(self.invoke::<i64>("release", call).await? == 1)
    }

    /// The unexpired holders, oldest grant first.
    pub(crate) async fn holders(&self, keys: &SharedKeys) -> Result<Vec<Holding>, LockError> {
        let mut call = HOLDERS.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        let flat: Vec<redis::Value> = self.invoke("holders", call).await?;
        let Some((permits, flat)) = flat.split_first() else {
            return Ok(Vec::new());
        };
        let permits: u32 = redis::from_redis_value(permits.clone())
            .map_err(|e| LockError::backend("the permit count", e))?;
        let mut out = Vec::new();
        for chunk in flat.chunks_exact(3) {
            let member: String = redis::from_redis_value(chunk[0].clone())
                .map_err(|e| LockError::backend("a holder's member", e))?;
            let left: i64 = redis::from_redis_value(chunk[1].clone())
                .map_err(|e| LockError::backend("a holder's expiry", e))?;
            let token: i64 = redis::from_redis_value(chunk[2].clone())
                .map_err(|e| LockError::backend("a holder's token", e))?;
            let (tag, owner) = member.split_once(':').unwrap_or(("p", &member));
            let access = match tag {
                "w" => Access::Write,
                "r" => Access::Read,
                _ => Access::Permit(permits),
            };
            out.push(Holding::new(
                access,
                OwnerId::from_stored(owner),
                FencingToken::from_signed(token, "a holder's token")?,
                Duration::from_millis(u64::try_from(left).unwrap_or(0)),
            ));
        }
        out.sort_by_key(|h| h.token);
        Ok(out)
    }
}
