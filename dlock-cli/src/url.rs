//! Which backend to use: `--url`, then `DLOCK_URL`, then an SQLite file of our own.

use std::path::PathBuf;

use dlock_any::{Fallback, LockError};

/// The embedded default: an SQLite file in the user's state directory
/// (`$XDG_STATE_HOME/dlock/locks.sqlite`, else `~/.local/state/dlock/locks.sqlite`),
/// created if missing. With neither variable set (a bare service environment) it is
/// refused: a file beside the current directory would differ from one directory to
/// the next, and two runs would not exclude each other.
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
    let Some(dir) = dir else {
        return Err(LockError::Config(
            "no default lock file: neither HOME nor XDG_STATE_HOME is set; give --url or \
             DLOCK_URL (one file for every run of this host, e.g. \
             sqlite:///var/lib/dlock/locks.sqlite)"
                .into(),
        ));
    };
    std::fs::create_dir_all(&dir).map_err(|e| {
        LockError::Config(format!(
            "cannot create state directory {}: {e}",
            dir.display()
        ))
    })?;
    // the path as a URL path: `%`, `?`, `#` (a HOME may hold them) percent-encoded,
    // which the SQLite URL's reader decodes
    const PATH: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
        .add(b' ')
        .add(b'"')
        .add(b'#')
        .add(b'%')
        .add(b'?')
        .add(b'<')
        .add(b'>')
        .add(b'`')
        .add(b'{')
        .add(b'}');
    let file = dir.join("locks.sqlite");
    let path = percent_encoding::utf8_percent_encode(&file.to_string_lossy(), PATH).to_string();
    Ok(format!("sqlite://{path}"))
}

/// The URL to use: the flag (which clap also fills from `DLOCK_URL`) or the default.
///
/// # Errors
/// An empty URL — `--url ""`, or `DLOCK_URL` set to nothing, as a cron line with an
/// unset variable gives it — is refused: falling back to this user's SQLite file on
/// this host would exclude nobody on the other hosts.
pub fn resolve(flag: Option<&str>) -> Result<String, LockError> {
    let empty_env = std::env::var_os("DLOCK_URL").is_some_and(|v| v.is_empty());
    match flag {
        Some(u) if !u.trim().is_empty() => Ok(u.to_owned()),
        // clap fills the flag from an empty DLOCK_URL too
        Some(_) if empty_env => Err(empty_url("DLOCK_URL (or --url)")),
        Some(_) => Err(empty_url("--url")),
        None if empty_env => Err(empty_url("DLOCK_URL")),
        None => default_url(),
    }
}

/// The backend `flag` (or `DLOCK_URL`, or the default) names, connected.
///
/// # Errors
/// As [`resolve`], and as `dlock_any::connect`.
///
/// # Cancel safety
/// It only connects: dropping it holds nothing.
pub async fn connect(
    flag: Option<&str>,
) -> Result<std::sync::Arc<dyn dlock_any::DistributedLock>, LockError> {
    dlock_any::connect(&resolve(flag)?).await
}

fn empty_url(source: &str) -> LockError {
    LockError::Config(format!(
        "{source} is empty (an unset variable?): name the lock service, e.g. \
         postgres://host/db, or leave DLOCK_URL unset for this user's SQLite file, which \
         excludes the processes of this host only"
    ))
}

/// What a run under `url` may fall back to when the lock service is down: nothing
/// (`fail-fast`, the default), or — with `allow_unlocked` — running unlocked
/// (`proceed`).
///
/// # Errors
/// `fallback=local` (an in-process lock, which excludes nobody across processes:
/// every `dlock` is a process of its own), and `fallback=proceed` without
/// `allow_unlocked`.
pub fn fallback_allowed(url: &str, allow_unlocked: bool) -> Result<Fallback, LockError> {
    across_processes(url)?;
    match dlock_any::fallback_of(url)? {
        Fallback::Local => Err(LockError::Config(
            "fallback=local excludes only the callers inside one process, and every dlock \
             is a process of its own: it would exclude nobody. Drop it (the default fails \
             fast), or run unlocked on purpose with fallback=proceed and --allow-unlocked"
                .into(),
        )),
        Fallback::Proceed if !allow_unlocked => Err(LockError::Config(
            "fallback=proceed runs the command without any lock while the lock service is \
             down: add --allow-unlocked to mean it (the command then sees DLOCK_UNLOCKED=1 \
             and DLOCK_TOKEN=0)"
                .into(),
        )),
        other => Ok(other),
    }
}

/// Refuses `memory://` for a lock another process must see: its locks live inside this
/// one `dlock` process, so a run or an election under it excludes nobody — refused for
/// the same reason as `fallback=local`.
///
/// # Errors
/// [`LockError::Config`] for a `memory:` URL.
fn across_processes(url: &str) -> Result<(), LockError> {
    if url.trim_start().to_ascii_lowercase().starts_with("memory:") {
        return Err(LockError::Config(
            "memory:// keeps its locks inside this one dlock process, and every dlock is a \
             process of its own: it would exclude nobody. Use sqlite:// for the processes of \
             one host, a server's URL for many"
                .into(),
        ));
    }
    Ok(())
}

/// For a subcommand that cannot run on a fallback lease (`elect`: a leader of one
/// process is no leader; `acquire`: a ticket stands for a lease on the service).
///
/// # Errors
/// `fallback=local` or `fallback=proceed` in `url`.
pub fn no_fallback(url: &str, what: &str) -> Result<(), LockError> {
    across_processes(url)?;
    match dlock_any::fallback_of(url)? {
        Fallback::FailFast => Ok(()),
        other => Err(LockError::Config(format!(
            "{what} cannot fall back (fallback={other}): it needs the lock service itself; \
             drop fallback= from the URL"
        ))),
    }
}
