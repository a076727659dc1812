//! `dlock doctor` on real servers, each finding provoked where a server can be set up
//! to break a guarantee; and the CLI's conventions: completions, man page, version.
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

use dlock_conformance::{TestServer, required_env};

mod common;
use common::{backend_url, output, scratch, scratch_sqlite};

const GUARANTEE_BROKEN: i32 = 78;

/// `dlock doctor --url URL`: its exit code and its text.
fn doctor(url: &str) -> (i32, String) {
    let out: Output = output(url, &["doctor", "--url", url]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Doctor's report on `url`, which must find nothing broken (exit code 0).
fn healthy(url: &str) -> String {
    let (code, text) = doctor(url);
    assert_eq!(code, 0, "{text}");
    text
}

/// Doctor's report on `url`, which must call a guarantee broken (exit code 78).
fn critical(url: &str) -> String {
    let (code, text) = doctor(url);
    assert_eq!(code, GUARANTEE_BROKEN, "{text}");
    text
}

/// The line of `text` for `check` (its name in the check column), whatever its
/// severity.
fn line<'a>(text: &'a str, check: &str) -> &'a str {
    text.lines()
        .find(|l| {
            l.trim_start()
                .split_once(' ')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(&format!("{check}  ")))
        })
        .unwrap_or_else(|| panic!("no {check:?} finding in:\n{text}"))
}

/// Asserts that doctor's finding on `check` says `words`.
fn says(text: &str, check: &str, words: &str) {
    assert!(
        line(text, check).contains(words),
        "{check}: {words:?} in:\n{text}"
    );
}

fn private_redis(extra: &[&str]) -> (TestServer, String) {
    let dir = scratch();
    let server = TestServer::redis(&dir, extra);
    let url = format!("redis://127.0.0.1:{}", server.port);
    (server, url)
}

#[cfg(feature = "server-tests")]
#[test]
fn redis_with_eviction_of_any_key_is_critical() {
    let (_server, url) =
        private_redis(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"]);
    let text = critical(&url);
    let eviction = line(&text, "eviction");
    assert!(
        eviction.contains("CRITICAL") && eviction.contains("allkeys-lru"),
        "{text}"
    );
    assert!(text.contains("set maxmemory-policy noeviction"), "{text}");
}

#[cfg(feature = "server-tests")]
#[test]
fn redis_replica_is_critical_and_plain_server_only_warns() {
    let primary = required_env("DLOCK_TEST_REDIS_URL");
    let text = healthy(&primary);
    says(&text, "persistence", "warning");
    says(&text, "server clock offset", "ms from this host");
    let addr = primary.trim_start_matches("redis://").trim_end_matches('/');
    let (host, port) = addr.rsplit_once(':').unwrap();
    let (_replica, url) = private_redis(&["--replicaof", host, port]);
    let text = critical(&url);
    says(&text, "replication", "connected to a slave");
}

#[cfg(feature = "server-tests")]
#[test]
fn redlock_reports_every_node_and_the_clock_spread() {
    let text = healthy(&backend_url("redlock"));
    for node in 1..=5 {
        line(&text, &format!("node {node}: server version"));
    }
    line(&text, "clock spread");
    assert!(
        line(&text, "restart delay").contains("warning"),
        "off is a warning: {text}"
    );
}

/// Nodes just started rest for the restart delay (each says how long more), and a user
/// whose ACL denies INFO — which the delay needs — is critical: such nodes grant nothing.
#[cfg(feature = "server-tests")]
#[test]
fn redlock_reports_resting_nodes_and_a_user_that_may_not_read_uptime() {
    let nodes: Vec<_> = (0..3)
        .map(|_| {
            private_redis(&[
                "--user", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info",
            ])
        })
        .collect();
    let hosts: Vec<&str> = nodes
        .iter()
        .map(|(_, u)| u.trim_start_matches("redis://"))
        .collect();
    let hosts = hosts.join(",");
    let text = healthy(&format!("redlock://{hosts}?restart-delay=1h"));
    says(&text, "restart delay", "60m");
    for node in 1..=3 {
        let resting = line(&text, &format!("node {node}: resting"));
        assert!(
            resting.contains("grants nothing for 59m") || resting.contains("for 60m"),
            "{text}"
        );
    }
    let text = critical(&format!("redlock://noinfo:pw@{hosts}"));
    assert!(text.contains("ACL SETUSER <user> +info"), "{text}");
    for node in 1..=3 {
        let denied = line(&text, &format!("node {node}: uptime"));
        assert!(
            denied.contains("CRITICAL") && denied.contains("grants nothing"),
            "{text}"
        );
    }
}

/// The test servers run without synchronous commits (for speed): exactly what doctor
/// must call critical.
#[cfg(feature = "server-tests")]
#[test]
fn postgres_without_synchronous_commit_is_critical() {
    let text = critical(&required_env("DLOCK_TEST_POSTGRES_URL"));
    says(&text, "synchronous_commit", "CRITICAL");
    says(&text, "wake-ups", "LISTEN/NOTIFY round trip");
    says(&text, "role", "primary");
    says(&text, "lock table", "name,owner,token,expires_at");
    assert!(
        !text.contains("postgres:postgres@"),
        "the password is shown: {text}"
    );
}

#[cfg(feature = "server-tests")]
#[test]
fn mariadb_without_a_flush_per_commit_is_critical() {
    let text = critical(&required_env("DLOCK_TEST_MYSQL_URL"));
    says(&text, "innodb_flush_log_at_trx_commit", "CRITICAL");
    line(&text, "database clock offset");
}

#[test]
fn sqlite_reports_its_filesystem() {
    let url = scratch_sqlite("doctor.sqlite");
    let text = healthy(&url);
    says(&text, "filesystem", "is on");
    line(&text, "journal_mode");
    says(&text, "lock table", "info");
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_reports_its_leader() {
    let text = healthy(&backend_url("etcd"));
    says(&text, "leader", "member");
    line(&text, "members");
}

/// A session timeout below the server's minimum is clamped: doctor says by how much.
#[cfg(all(feature = "zookeeper", feature = "server-tests"))]
#[test]
fn zookeeper_reports_a_clamped_session_timeout() {
    let url = format!(
        "zk://{}?session_timeout=100ms",
        required_env("DLOCK_TEST_ZK_ADDR")
    );
    let text = healthy(&url);
    let timeout = line(&text, "session timeout");
    assert!(
        timeout.contains("warning") && timeout.contains("asked 100 ms"),
        "{text}"
    );
    line(&text, "session timeout bounds");
    // the test servers keep TTL nodes and look for expired ones every second
    says(
        &text,
        "tickets (TTL nodes)",
        "on; an expired TTL node went after",
    );
}

/// Tickets on ZooKeeper as servers come: without TTL nodes doctor warns that `dlock
/// acquire` cannot hand a lock over; with them but the container manager's minute
/// between looks, that a ticket's lock outlives a taker that stopped by up to that.
#[cfg(feature = "server-tests")]
#[test]
fn zookeeper_ticket_findings_name_the_server_flags() {
    let dir = scratch();
    let (_plain, addr) = dlock_conformance::standalone_zk(&dir.join("plain"), &[]);
    let text = healthy(&format!("zk://{addr}"));
    let tickets = line(&text, "tickets (TTL nodes)");
    assert!(
        tickets.contains("warning") && tickets.contains("extendedTypesEnabled"),
        "{text}"
    );
    let (_ttl, addr) = dlock_conformance::standalone_zk(
        &dir.join("ttl"),
        &["-Dzookeeper.extendedTypesEnabled=true"],
    );
    let text = healthy(&format!("zk://{addr}"));
    let tickets = line(&text, "tickets (TTL nodes)");
    assert!(
        tickets.contains("warning") && tickets.contains("still there after 3 s"),
        "{text}"
    );
    assert!(
        text.contains("-Dznode.container.checkIntervalMs=1000"),
        "{text}"
    );
}

#[test]
fn completions_man_page_and_version_come_from_the_definition() {
    let url = "memory://";
    for shell in ["bash", "zsh", "fish"] {
        let out = output(url, &["completions", shell]);
        assert_eq!(out.status.code(), Some(0));
        let script = String::from_utf8(out.stdout).unwrap();
        for word in ["acquire", "doctor", "list", "run"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    let man = String::from_utf8(output(url, &["man"]).stdout).unwrap();
    assert!(
        man.contains(".TH dlock 1") && man.contains("doctor"),
        "{man}"
    );
    // the pages the top page's SEE ALSO names exist: one per subcommand
    let run = String::from_utf8(output(url, &["man", "run"]).stdout).unwrap();
    assert!(
        run.contains(".TH dlock-run 1") && run.contains("max\\-hold"),
        "{run}"
    );
    // the sections a reader looks for, each once; the NAME line not repeated
    for section in [
        ".SH NAME",
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH EXAMPLES",
    ] {
        assert_eq!(run.matches(section).count(), 1, "{section}: {run}");
    }
    assert!(!run.contains(".SH EXTRA"), "{run}");
    let about = "Run COMMAND while holding lock NAME";
    assert_eq!(run.matches(about).count(), 1, "{run}");
    assert_eq!(output(url, &["man", "nonsense"]).status.code(), Some(2));
    let dir = common::scratch();
    let wrote = output(url, &["man", "--out-dir", dir.to_str().unwrap()]);
    assert_eq!(wrote.status.code(), Some(0), "{wrote:?}");
    for page in ["dlock.1", "dlock-run.1", "dlock-elect.1", "dlock-release.1"] {
        assert!(dir.join(page).exists(), "no {page}");
    }
    let version = String::from_utf8(output(url, &["--version"]).stdout).unwrap();
    assert!(version.contains("backends: sqlite"), "{version}");
    for sub in [
        "run",
        "elect",
        "leader",
        "status",
        "bench",
        "acquire",
        "renew",
        "release",
        "list",
        "doctor",
        "completions",
        "man",
    ] {
        let help = String::from_utf8(output(url, &[sub, "--help"]).stdout).unwrap();
        assert!(
            help.contains("Examples:"),
            "dlock {sub} --help has no examples"
        );
    }
}
