//! Database servers that speak only TLS, started by a test with [`TestCerts`]:
//! PostgreSQL (`hostssl` lines only) and MariaDB (`require_secure_transport`), each on
//! `127.0.0.1` (PostgreSQL also on `127.0.0.2`, which the server certificate does not
//! name), each with a user that signs in with the client certificate ([`TestCerts::CLIENT`]) and one with
//! a password (`dlock` and [`TestServer::PASSWORD`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{TestCerts, TestServer, free_port};

/// Whether this process runs as root (PostgreSQL refuses to; MariaDB needs telling).
fn root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/services installs it)"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// PostgreSQL's programs: the newest `/usr/lib/postgresql/*/bin`.
fn pg_bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL in /usr/lib/postgresql (scripts/services installs it)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().expect("a PostgreSQL with initdb")
}

impl TestServer {
    /// The password of the user `dlock` on the TLS servers: every character that ends
    /// a URL's parts, as a URL must carry it percent-encoded
    /// ([`TestServer::PASSWORD_ENCODED`]).
    pub const PASSWORD: &'static str = "p?a#s/s%w@rd:x";
    /// [`TestServer::PASSWORD`] percent-encoded.
    pub const PASSWORD_ENCODED: &'static str = "p%3Fa%23s%2Fs%25w%40rd%3Ax";

    /// A PostgreSQL that accepts only TLS, its files in `dir` (a short path: its socket
    /// lives there): `dlock` and [`TestServer::PASSWORD`] by password, [`TestCerts::CLIENT`] by certificate,
    /// both on the database `postgres`.
    ///
    /// # Panics
    /// When PostgreSQL is missing or does not start.
    #[must_use]
    pub fn postgres_tls(dir: &Path, certs: &TestCerts) -> Self {
        let bin = pg_bin();
        let data = dir.join("pg");
        let as_postgres: Vec<String> = if root() {
            run(
                "chown",
                &["-R", "postgres:postgres", &dir.display().to_string()],
            );
            [
                "setpriv",
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
            ]
            .map(str::to_owned)
            .to_vec()
        } else {
            Vec::new()
        };
        let (program, lead) = match as_postgres.split_first() {
            Some((p, rest)) => (p.clone(), rest.to_vec()),
            None => (String::new(), Vec::new()),
        };
        let command = |tool: &str, args: &[String]| {
            let exe = bin.join(tool).display().to_string();
            if program.is_empty() {
                (exe, args.to_vec())
            } else {
                let mut all = lead.clone();
                all.push(exe);
                all.extend_from_slice(args);
                (program.clone(), all)
            }
        };
        let (p, a) = command(
            "initdb",
            &[
                "-D",
                &data.display().to_string(),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
            .map(str::to_owned),
        );
        run(&p, &a.iter().map(String::as_str).collect::<Vec<_>>());
        // the key must belong to the server's user, readable by it alone
        for (from, to) in [
            (&certs.cert, "server.crt"),
            (&certs.key, "server.key"),
            (&certs.ca, "ca.crt"),
        ] {
            std::fs::copy(from, data.join(to)).expect("copy a certificate");
        }
        std::fs::write(
            data.join("pg_hba.conf"),
            format!(
                "local all all trust\n\
                 hostssl all {client} 127.0.0.0/8 cert\n\
                 hostssl all all 127.0.0.0/8 scram-sha-256\n",
                client = TestCerts::CLIENT
            ),
        )
        .expect("write pg_hba.conf");
        if root() {
            run(
                "chown",
                &["-R", "postgres:postgres", &data.display().to_string()],
            );
        }
        run(
            "chmod",
            &["600", &data.join("server.key").display().to_string()],
        );
        let port = free_port();
        let (p, a) = command(
            "postgres",
            &[
                "-D".into(),
                data.display().to_string(),
                "-p".into(),
                port.to_string(),
                "-k".into(),
                dir.display().to_string(),
                "-c".into(),
                "listen_addresses=127.0.0.1,127.0.0.2".into(),
                "-c".into(),
                "ssl=on".into(),
                "-c".into(),
                "ssl_cert_file=server.crt".into(),
                "-c".into(),
                "ssl_key_file=server.key".into(),
                "-c".into(),
                "ssl_ca_file=ca.crt".into(),
                "-c".into(),
                "fsync=off".into(),
            ],
        );
        let server = Self::start_on(&p, &a, port);
        let sql = format!(
            "CREATE ROLE dlock LOGIN SUPERUSER PASSWORD '{password}'; CREATE ROLE {} LOGIN SUPERUSER;",
            TestCerts::CLIENT,
            password = Self::PASSWORD
        );
        let psql = bin.join("psql").display().to_string();
        let socket = dir.display().to_string();
        let port = port.to_string();
        let args = [
            "-X", "-q", "-h", &socket, "-p", &port, "-U", "postgres", "-d", "postgres",
        ];
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // the postmaster listens before it takes logins
        loop {
            let ok = Command::new(&psql)
                .args(args)
                .args(["-c", &sql])
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                break;
            }
            assert!(
                std::time::Instant::now() < end,
                "PostgreSQL did not take logins"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        server
    }

    /// A MariaDB that accepts only TLS (and its socket), its files in `dir` (a short
    /// path): `dlock` and [`TestServer::PASSWORD`] by password, [`TestCerts::CLIENT`] by certificate, both
    /// on the database `dlock`.
    ///
    /// # Panics
    /// When MariaDB is missing or does not start.
    #[must_use]
    pub fn mariadb_tls(dir: &Path, certs: &TestCerts) -> Self {
        let data = dir.join("mariadb").display().to_string();
        let socket = dir.join("my.sock").display().to_string();
        let user = if root() {
            vec!["--user=root"]
        } else {
            Vec::new()
        };
        let install: Vec<String> = [
            "--no-defaults".to_owned(),
            format!("--datadir={data}"),
            "--auth-root-authentication-method=normal".to_owned(),
            "--skip-test-db".to_owned(),
            "--skip-name-resolve".to_owned(),
        ]
        .into_iter()
        .chain(user.iter().map(|u| (*u).to_owned()))
        .collect();
        run(
            "mariadb-install-db",
            &install.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let port = free_port();
        let p = |x: &Path| x.display().to_string();
        let args: Vec<String> = [
            "--no-defaults".to_owned(),
            format!("--datadir={data}"),
            format!("--port={port}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--socket={socket}"),
            "--skip-name-resolve".to_owned(),
            "--skip-log-bin".to_owned(),
            "--innodb-buffer-pool-size=16M".to_owned(),
            format!("--ssl-cert={}", p(&certs.cert)),
            format!("--ssl-key={}", p(&certs.key)),
            format!("--ssl-ca={}", p(&certs.ca)),
            "--require-secure-transport=ON".to_owned(),
        ]
        .into_iter()
        .chain(user.iter().map(|u| (*u).to_owned()))
        .collect();
        let server = Self::start_on("mariadbd", &args, port);
        let sql = format!(
            "CREATE DATABASE dlock;
             CREATE USER 'dlock'@'%' IDENTIFIED BY '{password}';
             GRANT ALL PRIVILEGES ON *.* TO 'dlock'@'%';
             CREATE USER '{c}'@'%' REQUIRE SUBJECT '/CN={c}';
             GRANT ALL PRIVILEGES ON dlock.* TO '{c}'@'%';",
            c = TestCerts::CLIENT,
            password = Self::PASSWORD
        );
        run(
            "mariadb",
            &[
                "--no-defaults",
                &format!("--socket={socket}"),
                "-uroot",
                "-e",
                &sql,
            ],
        );
        server
    }

    /// A `redis-server` that speaks only TLS with `certs`, on a free port of
    /// `127.0.0.1` and `127.0.0.2` (which the certificate does not name), without
    /// persistence, its files in `dir`; asking clients for a certificate when
    /// `client_certificates`.
    ///
    /// # Panics
    /// As [`TestServer::start`].
    #[must_use]
    pub fn redis_tls(dir: &Path, certs: &TestCerts, client_certificates: bool) -> Self {
        let p = |x: &Path| x.display().to_string();
        let auth = if client_certificates { "yes" } else { "no" };
        let args = [
            "--port",
            "0",
            "--tls-port",
            "{port}",
            "--bind",
            "127.0.0.1 127.0.0.2",
            "--tls-cert-file",
            &p(&certs.cert),
            "--tls-key-file",
            &p(&certs.key),
            "--tls-ca-cert-file",
            &p(&certs.ca),
            "--tls-auth-clients",
            auth,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &p(dir),
        ]
        .map(str::to_owned);
        Self::start("redis-server", &args)
    }
}
