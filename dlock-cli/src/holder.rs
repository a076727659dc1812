//! How a holder is shown: the process it said it was (host, pid, command, for how
//! long), else its owner id.

use dlock_any::{OwnerId, ProcessHolder};
use serde_json::{Value, json};

/// `web-3 pid 4121 (backup.sh) for 3m12s`, or the owner id of a holder that did not
/// say (another client, an older dlock).
pub fn who(owner: &OwnerId) -> String {
    ProcessHolder::of(owner).map_or_else(|| owner.to_string(), |p| p.to_string())
}

/// `web-3 pid 4121 (backup.sh)` for a table, or the owner id's first 8 characters.
pub fn who_short(owner: &OwnerId) -> String {
    match ProcessHolder::of(owner) {
        Some(p) => format!("{} pid {} ({})", p.host, p.pid, p.command),
        None => owner.as_str().get(..8).unwrap_or(owner.as_str()).to_owned(),
    }
}

/// The holder's process as JSON (`host`, `pid`, `command`, `since_unix`, `age_ms`),
/// or `null`.
pub fn json_of(owner: &OwnerId) -> Value {
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
