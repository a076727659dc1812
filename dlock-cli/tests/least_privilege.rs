//! `dlock migrate` and a role that may not create tables: an owner makes dlock's
//! schema (by `dlock migrate`, or by applying what `dlock migrate --print` shows), a
//! database administrator grants what `--print --grant ROLE` adds, and the role — its
//! password full of URL characters — runs every command with `create=false`. Before
//! that, its errors say what is missing; no output ever shows the password.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

mod common;
use common::{output, unique};
use dlock_conformance::required_env;

/// The application role's password, and as its URL carries it.
const PASSWORD: &str = "p?a#s/s%w@rd:x";
const ENCODED: &str = "p%3Fa%23s%2Fs%25w%40rd%3Ax";

/// A database the test server offers, as its owner reaches it.
struct Database {
    /// `postgres://…` or `mysql://…`, a role that may create anything.
    owner: String,
    mysql: bool,
}

impl Database {
    /// Runs `sql` (several statements) as the owner, through the database's own
    /// command-line client, as an administrator applies a script.
    fn apply(&self, sql: &str) {
        let mut client = if self.mysql {
            // mysql://user:password@host:port/database
            let rest = self.owner.strip_prefix("mysql://").unwrap();
            let (auth, place) = rest.rsplit_once('@').unwrap();
            let (user, password) = auth.split_once(':').unwrap();
            let (address, database) = place.split_once('/').unwrap();
            let (host, port) = address.split_once(':').unwrap();
            let mut c = Command::new("mariadb");
            c.args(["-h", host, "-P", port, "-u", user, database])
                .env("MYSQL_PWD", password);
            c
        } else {
            let mut c = Command::new("psql");
            c.args([
                self.owner.as_str(),
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-f",
                "-",
            ]);
            c
        };
        let mut child = client
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the database's client (psql, mariadb), from scripts/services");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(sql.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{sql}\n{out:?}");
    }

    /// The URL of `role` with the password, on `table`, with `extra` parameters.
    fn url_of(&self, role: &str, table: &str, extra: &str) -> String {
        let (scheme, rest) = self.owner.split_once("://").unwrap();
        let place = rest.rsplit_once('@').unwrap().1;
        let place = place.split('?').next().unwrap();
        format!("{scheme}://{role}:{ENCODED}@{place}?table={table}{extra}")
    }

    fn owner_url(&self, table: &str) -> String {
        let sep = if self.owner.contains('?') { '&' } else { '?' };
        format!("{}{sep}table={table}", self.owner)
    }
}

/// What a command printed, both streams; checked for the password first.
fn said(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for part in [PASSWORD, ENCODED, "s%w@rd", "p?a#s", "%3Fa%23"] {
        assert!(!text.contains(part), "the password shows: {text}");
    }
    text
}

/// What a command that must succeed printed on stdout.
fn ok(url: &str, args: &[&str]) -> String {
    let out = output(url, args);
    let text = said(&out);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
    String::from_utf8(out.stdout).unwrap()
}

fn every_command_as_a_role_without_create(db: &Database) {
    let suffix = format!("{:012x}", dlock_any::random_u64() >> 16);
    let (role, table) = (format!("dlock_app_{suffix}"), format!("lp_{suffix}"));
    let account = if db.mysql {
        format!("'{role}'@'%'")
    } else {
        role.clone()
    };
    db.apply(&if db.mysql {
        format!("CREATE USER {account} IDENTIFIED BY '{PASSWORD}';")
    } else {
        // PostgreSQL 15+ gives PUBLIC no CREATE on `public`; the role gets none either
        format!(
            "CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}';
             REVOKE CREATE ON SCHEMA public FROM {role};"
        )
    });

    // --print needs no server: the statements come from the URL alone
    let scheme = if db.mysql { "mysql" } else { "postgres" };
    let offline = format!("{scheme}://nobody@unreachable.invalid:1/app?table={table}");
    let printed = ok(&offline, &["migrate", "--print", "--grant", &account]);
    assert!(
        printed.contains(&format!("CREATE TABLE IF NOT EXISTS {table} (")),
        "{printed}"
    );
    assert!(printed.contains(&format!("TO {account};")), "{printed}");

    // before any schema: the default (create=true) is refused for the privilege,
    // with the way out (MariaDB refuses a role without grants at connect already)
    let refused = output(&db.url_of(&role, &table, ""), &["run", "x", "--", "true"]);
    let text = said(&refused);
    assert_ne!(refused.status.code(), Some(0), "{text}");
    assert!(
        text.contains("denied") && text.contains("dlock migrate"),
        "{text}"
    );
    // create=false where the tables are missing names the table and the way to make it
    let missing = output(
        &format!("{}&create=false", db.owner_url(&table)),
        &["run", "x", "--", "true"],
    );
    let text = said(&missing);
    assert_ne!(missing.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&table) && text.contains("dlock migrate --print"),
        "{text}"
    );
    let app = db.url_of(&role, &table, "&create=false");

    // the owner makes the schema: on MariaDB by applying the printed script, on
    // PostgreSQL with `dlock migrate` (the script applied after it changes nothing)
    if db.mysql {
        db.apply(&printed);
    } else {
        let made = ok(&db.owner_url(&table), &["migrate"]);
        assert!(made.contains("schema is ready"), "{made}");
        db.apply(&printed);
    }
    let again = ok(&db.owner_url(&table), &["migrate"]);
    assert!(again.contains(&format!("{table}_queue")), "{again}");

    // every command, as the role
    let name = unique("least-privilege");
    ok(&app, &["run", &name, "--", "true"]);
    ok(&app, &["elect", &format!("{name}/e"), "--", "true"]);
    // the run is over: no leader, which `leader` answers with 1
    let leader = output(&app, &["leader", &format!("{name}/e")]);
    assert_eq!(leader.status.code(), Some(1), "{}", said(&leader));
    let ticket = ok(&app, &["acquire", "--ttl", "1m", &name]);
    let ticket = ticket.trim();
    let renewed = ok(&app, &["renew", ticket]);
    assert!(ok(&app, &["status", &name]).contains("held"), "status");
    assert!(ok(&app, &["list"]).contains(&name), "list");
    ok(&app, &["release", renewed.trim()]);
    ok(&app, &["acquire", "--ttl", "1m", &name]);
    ok(&app, &["release", "--force", "--yes", "--now", &name]);
    ok(&app, &["prune", "--idle-for", "1d"]);
    let doctor = output(&app, &["doctor"]);
    let text = said(&doctor);
    assert!(!text.contains("denied"), "{text}");

    // the password kept out of the URL: in a file the URL names, or in the environment
    let file = std::env::temp_dir().join(format!("dlock-pw-{suffix}"));
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)
            .unwrap();
        writeln!(f, "{PASSWORD}").unwrap();
    }
    let bare = app.replace(&format!(":{ENCODED}@"), "@");
    assert_ne!(bare, app);
    let from_file = format!("{bare}&password-file={}", file.display());
    ok(&from_file, &["run", &name, "--", "true"]);
    // (and the command run under the lock does not get it)
    let out = common::dlock(&bare)
        .env("DLOCK_PASSWORD", PASSWORD)
        .args([
            "run",
            &name,
            "--",
            "sh",
            "-c",
            "test -z \"$DLOCK_PASSWORD\"",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    if db.mysql {
        // (the shared PostgreSQL trusts loopback logins: only MariaDB checks passwords)
        let refused = output(&bare, &["run", &name, "--", "true"]);
        let text = said(&refused);
        assert_ne!(refused.status.code(), Some(0), "no password: {text}");
    }
    std::fs::remove_file(&file).unwrap();

    if db.mysql {
        // a server in --read-only refuses the role (not the owner, whose privileges
        // pass it): named as such, not retried as an outage (MySQL numbers its errors;
        // the SQLSTATE of this one is HY000, which says nothing)
        let read_only = ReadOnly::on(db);
        let refused = output(&app, &["run", &name, "--", "true"]);
        drop(read_only);
        let text = said(&refused);
        assert_eq!(refused.status.code(), Some(70), "{text}");
        assert!(text.contains("point dlock at the primary"), "{text}");
    }

    let schema = dlock_any::Schema::for_url(&db.owner_url(&table)).unwrap();
    db.apply(&if db.mysql {
        format!(
            "DROP USER {account}; DROP TABLE {};",
            schema.tables.join(", ")
        )
    } else {
        format!(
            "DROP OWNED BY {role}; DROP ROLE {role}; DROP TABLE {} CASCADE; DROP FUNCTION {};",
            schema.tables.join(", "),
            schema.functions.join(", ")
        )
    });
}

/// A MariaDB in `--read-only` while it lives, whatever ends the test.
struct ReadOnly<'a>(&'a Database);

impl<'a> ReadOnly<'a> {
    fn on(db: &'a Database) -> Self {
        db.apply("SET GLOBAL read_only = 1;");
        Self(db)
    }
}

impl Drop for ReadOnly<'_> {
    fn drop(&mut self) {
        self.0.apply("SET GLOBAL read_only = 0;");
    }
}

#[test]
fn postgres_role_without_create_runs_every_command() {
    every_command_as_a_role_without_create(&Database {
        owner: required_env("DLOCK_TEST_POSTGRES_URL"),
        mysql: false,
    });
}

#[test]
fn mariadb_account_with_table_grants_runs_every_command() {
    every_command_as_a_role_without_create(&Database {
        owner: required_env("DLOCK_TEST_MYSQL_URL"),
        mysql: true,
    });
}
