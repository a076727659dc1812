//! What `dlock` says to a person who slipped, on the SQLite default: each message
//! names the slip and what to do instead, with the exit code a script can test.

use crate::common::{dlock, free_addr, output, scratch_sqlite, sqlite_in, status_of, unique};
use crate::{LEASE_LOST, USAGE};

fn said(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_command_without_its_double_dash_is_explained() {
    let url = scratch_sqlite("locks.sqlite");
    let out = output(&url, &["run", "nightly", "true"]);
    assert_eq!(out.status.code(), Some(USAGE));
    assert!(
        said(&out).contains("put `--` between the lock names and the command"),
        "{}",
        said(&out)
    );
}

#[test]
fn a_negative_duration_is_named_as_such() {
    let url = scratch_sqlite("locks.sqlite");
    let out = output(&url, &["run", "--ttl", "-5s", "x", "--", "true"]);
    assert_eq!(out.status.code(), Some(USAGE));
    let err = said(&out);
    assert!(
        err.contains("cannot be negative") && !err.contains("tip:"),
        "{err}"
    );
}

#[test]
fn hold_limits_are_refused_in_the_flags_words() {
    let url = scratch_sqlite("locks.sqlite");
    let out = output(
        &url,
        &[
            "run",
            "--min-hold",
            "10s",
            "--max-hold",
            "5s",
            "x",
            "--",
            "true",
        ],
    );
    assert_eq!(out.status.code(), Some(USAGE));
    let err = said(&out);
    assert!(
        err.contains("--min-hold (10.0s) is longer than --max-hold (5.0s)"),
        "{err}"
    );
    assert!(!err.contains("min_hold"), "{err}");
}

#[test]
fn a_lock_inside_one_process_is_refused_for_a_command() {
    let out = output("memory://", &["run", "x", "--", "true"]);
    assert_eq!(out.status.code(), Some(USAGE));
    assert!(said(&out).contains("exclude nobody"), "{}", said(&out));
}

#[test]
fn the_metrics_address_may_be_a_host_name() {
    let url = scratch_sqlite("locks.sqlite");
    let port = free_addr().rsplit(':').next().unwrap().to_owned();
    let out = output(
        &url,
        &[
            "run",
            "--metrics-addr",
            &format!("localhost:{port}"),
            "x",
            "--",
            "true",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
}

#[test]
fn an_empty_list_says_so_on_stderr_only() {
    let url = scratch_sqlite("locks.sqlite");
    let out = output(&url, &["list"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(said(&out).contains("no locks held"), "{}", said(&out));
    let out = output(&url, &["list", "--json"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    assert!(out.stderr.is_empty());
}

#[test]
fn verbose_runs_say_when_they_took_and_released_the_lock() {
    let url = scratch_sqlite("locks.sqlite");
    let name = unique("verbose");
    let out = output(&url, &["run", "-v", &name, "--", "true"]);
    assert_eq!(out.status.code(), Some(0));
    let err = said(&out);
    assert!(
        err.contains(&format!("dlock: took {name} (token ")),
        "{err}"
    );
    assert!(
        err.contains(&format!("dlock: released {name} after holding it")),
        "{err}"
    );
    assert!(err.contains("the command exited 0"), "{err}");
    let quiet = output(&url, &["run", &name, "--", "true"]);
    assert!(quiet.stderr.is_empty(), "{}", said(&quiet));
}

#[test]
fn releasing_a_name_or_a_spent_ticket_says_what_happened() {
    let url = scratch_sqlite("locks.sqlite");
    let name = unique("spent");
    let out = output(&url, &["release", &name]);
    assert_eq!(out.status.code(), Some(USAGE));
    assert!(
        said(&out).contains("release --force NAME"),
        "{}",
        said(&out)
    );
    let ticket = output(&url, &["acquire", &name]);
    let ticket = String::from_utf8(ticket.stdout).unwrap();
    assert_eq!(
        output(&url, &["release", ticket.trim()]).status.code(),
        Some(0)
    );
    let again = output(&url, &["release", ticket.trim()]);
    assert_eq!(again.status.code(), Some(LEASE_LOST));
    assert!(
        said(&again).contains("released already, run out"),
        "{}",
        said(&again)
    );
}

#[test]
fn a_renewal_without_a_ttl_never_shortens_the_lease() {
    let url = scratch_sqlite("locks.sqlite");
    let name = unique("renew-keeps");
    let first = output(&url, &["acquire", "--ttl", "1m", &name]);
    let first = String::from_utf8(first.stdout).unwrap();
    let longer = output(&url, &["renew", "--ttl", "10m", first.trim()]);
    assert_eq!(longer.status.code(), Some(0), "{}", said(&longer));
    // the first ticket again, without --ttl: still about ten minutes left
    let again = output(&url, &["renew", first.trim()]);
    assert_eq!(again.status.code(), Some(0), "{}", said(&again));
    let json = status_of(&url, &name);
    let left = json["remaining_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no time left in {json}"));
    assert!(left > 300_000, "shortened to {left} ms: {json}");
    assert_eq!(
        output(&url, &["release", first.trim()]).status.code(),
        Some(0)
    );
}

#[test]
fn a_ticket_shows_the_process_that_acquired_it() {
    let url = scratch_sqlite("locks.sqlite");
    let name = unique("ticket-holder");
    let status_of = |name: &str| {
        let out = output(&url, &["status", "--json", name]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // this test is the process that ran `dlock acquire`: its pid is the holder's
    let ticket = output(&url, &["acquire", &name]);
    assert_eq!(ticket.status.code(), Some(0), "{}", said(&ticket));
    let json = status_of(&name);
    assert!(
        json.contains(&format!("\"pid\":{},", std::process::id())),
        "{json}"
    );
    let ticket = String::from_utf8(ticket.stdout).unwrap();
    assert_eq!(
        output(&url, &["release", ticket.trim()]).status.code(),
        Some(0)
    );
    // a label names it instead
    let labelled = dlock(&url)
        .args(["acquire", "--label", "deploy-42", &name])
        .output()
        .unwrap();
    assert_eq!(labelled.status.code(), Some(0), "{}", said(&labelled));
    let json = status_of(&name);
    assert!(json.contains("\"command\":\"deploy-42\""), "{json}");
    let text = String::from_utf8_lossy(&output(&url, &["status", &name]).stdout).into_owned();
    assert!(text.contains("(deploy-42) for "), "{text}");
    let ticket = String::from_utf8(labelled.stdout).unwrap();
    assert_eq!(
        output(&url, &["release", ticket.trim()]).status.code(),
        Some(0)
    );
}

/// Whether this test runs as root (who writes any file: such runs are made as
/// `nobody` instead, through setpriv(1)).
fn root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

/// A new directory `nobody` can search all the way down to: the temporary directory
/// may be a private one (mode 700, as CI runners make it), then `/tmp` or `/var/tmp`.
fn reachable_scratch() -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let searchable = |p: &std::path::Path| {
        p.ancestors()
            .all(|a| std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
    };
    let temp = std::env::temp_dir();
    let base = [temp.as_path(), "/tmp".as_ref(), "/var/tmp".as_ref()]
        .into_iter()
        .find(|b| searchable(b))
        .expect("a temporary directory every user can search");
    let d = base.join(format!("dlock-cli-{:016x}", dlock_any::random_u64()));
    std::fs::create_dir_all(&d).unwrap();
    set_mode(&d, 0o755);
    d
}

fn set_mode(p: &std::path::Path, m: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

/// `dlock run x -- true` on `url`; as root, run as `nobody` from a copy of the binary
/// that user can reach.
fn run_as_someone(url: &str) -> std::process::Output {
    if !root() {
        return output(url, &["run", "x", "--", "true"]);
    }
    let bin = reachable_scratch().join("dlock");
    std::fs::copy(env!("CARGO_BIN_EXE_dlock"), &bin).unwrap();
    set_mode(&bin, 0o755);
    std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["run", "x", "--", "true"])
        .env("DLOCK_URL", url)
        .env("HOME", "/nonexistent")
        .output()
        .expect("setpriv(1), from util-linux")
}

/// The uid `run_as_someone` runs as.
fn someone() -> u32 {
    use std::os::unix::fs::MetadataExt;
    if root() {
        65534
    } else {
        std::fs::metadata("/proc/self").unwrap().uid()
    }
}

/// A database file this user cannot write: the error names the file and its directory
/// with their owners and modes, and the user dlock runs as.
#[test]
fn an_unwritable_sqlite_file_names_its_owner_and_mode() {
    let dir = reachable_scratch();
    let url = sqlite_in(&dir, "locks.sqlite");
    assert_eq!(
        output(&url, &["run", "made", "--", "true"]).status.code(),
        Some(0)
    );
    for entry in std::fs::read_dir(&dir).unwrap() {
        set_mode(&entry.unwrap().path(), 0o444);
    }
    set_mode(&dir, 0o555);
    let out = run_as_someone(&url);
    set_mode(&dir, 0o755);
    let err = said(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    for part in [
        format!("{} (owner uid ", dir.join("locks.sqlite").display()),
        "mode 444)".to_owned(),
        format!("{} (owner uid ", dir.display()),
        "mode 555)".to_owned(),
        format!("writable by uid {}", someone()),
    ] {
        assert!(err.contains(&part), "{part:?} in {err}");
    }
}

/// A database file in a directory this user cannot search (it fails at the first
/// connection, before any statement): the error names that directory.
#[test]
fn a_database_behind_a_closed_directory_names_that_directory() {
    let dir = reachable_scratch();
    let closed = dir.join("closed");
    std::fs::create_dir(&closed).unwrap();
    let url = sqlite_in(&closed, "locks.sqlite");
    assert_eq!(
        output(&url, &["run", "made", "--", "true"]).status.code(),
        Some(0)
    );
    // root's own directory at 700 is closed to nobody; our own at 0 is closed to us
    let closed_mode = if root() { 0o700 } else { 0 };
    set_mode(&closed, closed_mode);
    let out = run_as_someone(&url);
    set_mode(&closed, 0o755);
    let err = said(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    for part in [
        format!(
            "the database file {} is out of uid {}'s reach",
            closed.join("locks.sqlite").display(),
            someone()
        ),
        format!("the directory {} (owner uid ", closed.display()),
        format!("mode {closed_mode:o}) cannot be searched"),
    ] {
        assert!(err.contains(&part), "{part:?} in {err}");
    }
}
