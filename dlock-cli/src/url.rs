//! Which backend to use: `--url`, then `DLOCK_URL`, then an SQLite file of our own.

use std::path::PathBuf;

use dlock_any::LockError;

/// The embedded default: an SQLite file in the user's state directory
/// (`$XDG_STATE_HOME/dlock/locks.sqlite`, else `~/.local/state/dlock/locks.sqlite`),
/// or `./.dlock.sqlite` when there is no home. Its directory is created if missing.
pub fn default_url() -> Result<String, LockError> {
    let dir = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })
        .map(|d| d.join("dlock"));
    let file = match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(|e| {
                LockError::Config(format!(
                    "cannot create state directory {}: {e}",
                    dir.display()
                ))
            })?;
            dir.join("locks.sqlite")
        }
        None => PathBuf::from(".dlock.sqlite"),
    };
    Ok(format!("sqlite://{}", file.display()))
}

/// The URL to use: the flag (which clap also fills from `DLOCK_URL`) or the default.
pub fn resolve(flag: Option<&str>) -> Result<String, LockError> {
    match flag {
        Some(u) if !u.trim().is_empty() => Ok(u.to_owned()),
        _ => default_url(),
    }
}
