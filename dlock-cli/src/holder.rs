//! How a holder is shown: the process it said it was (host, pid, command, for how
//! long), else its owner id.

use dlock_any::{LockInfo, OwnerId, ProcessHolder};
use serde_json::{Value, json};

/// The process holding the lock, as it last said: the value it proclaimed once
/// granted (its age counts from the grant), else the one it waited with.
fn process(info: &LockInfo) -> Option<ProcessHolder> {
    info.value().as_ref().and_then(ProcessHolder::from_value)
}

/// `web-3 pid 4121 (backup.sh) for 3m12s`, or the owner id of a holder that did not
/// say (another client, an older dlock); `(revoked)` after a revoked one.
pub fn who(info: &LockInfo) -> String {
    let who = process(info).map_or_else(|| info.owner.to_string(), |p| p.to_string());
    if info.owner.is_revoked() {
        format!("{who} (revoked)")
    } else {
        who
    }
}

/// As [`who`], for a semaphore's or read-write lock's holder (known by its owner id).
pub fn who_owner(owner: &OwnerId) -> String {
    ProcessHolder::of(owner).map_or_else(|| owner.to_string(), |p| p.to_string())
}

/// `web-3 pid 4121 (backup.sh)` for a table, or the owner id's first 8 characters.
pub fn who_short(info: &LockInfo) -> String {
    match process(info) {
        Some(p) => format!("{} pid {} ({})", p.host, p.pid, p.command),
        None => info
            .owner
            .as_str()
            .get(..8)
            .unwrap_or(info.owner.as_str())
            .to_owned(),
    }
}

/// How long it has held, by this host's clock, for a table: `-` if it did not say.
pub fn age_cell(info: &LockInfo) -> String {
    process(info).map_or_else(|| "-".to_owned(), |p| dlock_any::format_duration(p.age()))
}

/// The holder's process as JSON (`host`, `pid`, `command`, `since_unix`, `age_ms`),
/// or `null`.
pub fn json_of(info: &LockInfo) -> Value {
    process(info).map_or(Value::Null, |p| process_json(&p))
}

/// As [`json_of`], for a holder known by its owner id.
pub fn json_of_owner(owner: &OwnerId) -> Value {
    ProcessHolder::of(owner).map_or(Value::Null, |p| process_json(&p))
}

/// A process as JSON.
pub fn process_json(p: &ProcessHolder) -> Value {
    let since = p
        .since
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    json!({
        "host": p.host,
        "pid": p.pid,
        "command": p.command,
        "since_unix": since,
        "age_ms": u64::try_from(p.age().as_millis()).unwrap_or(u64::MAX),
    })
}

/// The name `dlock run` and `dlock elect` record for `command`: its program's file
/// name (`/opt/jobs/backup.sh` → `backup.sh`).
pub fn command_name(command: &[std::ffi::OsString]) -> String {
    command
        .first()
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .map_or_else(
            || "command".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        )
}

/// How long a holder's lease has left, as dlock can know it. On a per-session backend
/// (ZooKeeper) a lease lasts as long as its holder's session, whose timeout only the
/// holder knows: what an observer would read there is its own session's timeout.
#[derive(Clone, Copy)]
pub struct Left {
    /// Whether leases live as long as their holder's session.
    pub per_session: bool,
}

impl Left {
    /// For `lock`'s backend.
    pub fn of(lock: &dyn dlock_any::DistributedLock) -> Self {
        Self {
            per_session: lock.capabilities().lease_scope == dlock_any::LeaseScope::PerSession,
        }
    }

    /// "12s left", or what is known instead.
    pub fn text(self, remaining: std::time::Duration) -> String {
        if self.per_session {
            "held while its holder's session lives".to_owned()
        } else {
            format!("{} left", dlock_any::format_duration(remaining))
        }
    }

    /// The table cell: "12s", or "session".
    pub fn cell(self, remaining: std::time::Duration) -> String {
        if self.per_session {
            "session".to_owned()
        } else {
            dlock_any::format_duration(remaining)
        }
    }

    /// Milliseconds left, or `null` when unknown.
    pub fn json(self, remaining: std::time::Duration) -> serde_json::Value {
        if self.per_session {
            serde_json::Value::Null
        } else {
            serde_json::json!(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX))
        }
    }
}
