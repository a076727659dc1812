//! `dlock prune`: deletes the rows of idle names, keeps held ones, and refuses
//! backends that keep no row per name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::thread::sleep;
use std::time::Duration;

mod common;
use common::{output, scratch_sqlite, unique};

const USAGE: i32 = 2;

#[test]
fn prune_deletes_idle_rows_and_keeps_held_ones() {
    let url = scratch_sqlite("prune.sqlite");
    let (idle, held) = (unique("pruned"), unique("kept"));
    let run = output(&url, &["run", &idle, "--", "true"]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let ticket = output(&url, &["acquire", "--ttl", "1m", &held]);
    assert_eq!(ticket.status.code(), Some(0), "{ticket:?}");
    let ticket = String::from_utf8(ticket.stdout).unwrap();
    sleep(Duration::from_millis(2500));

    let out = output(&url, &["prune", "--idle-for", "1s"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(said.starts_with("deleted 1 lock rows"), "{said}");
    let status = output(&url, &["status", ticket.trim()]);
    assert_eq!(status.status.code(), Some(0), "still held: {status:?}");

    let short = output(&url, &["prune", "--idle-for", "10ms"]);
    assert_eq!(short.status.code(), Some(USAGE), "{short:?}");
    let release = output(&url, &["release", ticket.trim()]);
    assert_eq!(release.status.code(), Some(0), "{release:?}");
}

#[test]
fn prune_refuses_a_backend_without_rows_per_name() {
    let out = output("memory://", &["prune", "--idle-for", "7d"]);
    assert_eq!(out.status.code(), Some(USAGE), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("cleans SQL tables"), "{err}");
}
