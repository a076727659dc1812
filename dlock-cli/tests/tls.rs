//! `dlock` as installed (its default features, TLS among them) against servers that
//! speak only TLS, started by each test with a private CA given in the URL: Redis
//! (which asks for a client certificate), PostgreSQL (`verify-full`, by password and by
//! client certificate) and MariaDB (`VERIFY_IDENTITY`). Each runs a command under a
//! lock; the public roots instead of the private CA are refused as an unknown CA
//! naming the host; a plain connection is refused; a host the certificate does not
//! name is refused as such.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

mod common;
use common::{output, unique};
use dlock_conformance::{TestCerts, TestServer, required_env};

const UNAVAILABLE: i32 = 69;

fn p(x: &Path) -> String {
    x.display().to_string()
}

/// What a command said on stderr; never the password, as written or encoded.
fn said(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for secret in [TestServer::PASSWORD, TestServer::PASSWORD_ENCODED, "s%w@rd"] {
        assert!(!text.contains(secret), "the password shows: {text}");
    }
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A run under a lock on `url` succeeds.
fn runs(url: &str) {
    let out = output(url, &["run", &unique("tls"), "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{url}: {}", said(&out));
}

/// A run on `url` is refused before the command, exit 69, with one line that says
/// `why` and names `host`.
fn refused(url: &str, why: &str, host: &str) {
    let out = output(
        url,
        &["run", &unique("tls"), "--", "touch", "/nonexistent/ran"],
    );
    let err = said(&out);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{url}: {err}");
    assert!(
        err.contains(why) && err.contains(host),
        "{why:?}, {host:?} in {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

/// A scratch directory for a server (short: its socket lives there), removed with
/// what the server left in it when the test ends.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn short_scratch(label: &str) -> (Scratch, TestCerts) {
    let dir = Path::new("/tmp").join(format!("{label}-{:08x}", dlock_any::random_u64() >> 32));
    std::fs::create_dir_all(&dir).unwrap();
    let certs = TestCerts::make(&dir);
    (Scratch(dir), certs)
}

const UNKNOWN_CA: &str = "not signed by a CA dlock trusts";
const NO_TLS: &str = "did not answer in TLS";
const OTHER_NAME: &str = "does not name";

#[test]
fn rediss_with_a_private_ca_and_a_client_certificate() {
    let (dir, certs) = short_scratch("dlock-cli-rediss");
    let server = TestServer::redis_tls(&dir.0, &certs, true);
    let at = |host: &str, query: &str| format!("rediss://{host}:{}?{query}", server.port);
    let client = format!(
        "tls-cert={}&tls-key={}",
        p(&certs.client_cert),
        p(&certs.client_key)
    );
    let trusted = format!("tls-ca={}&{client}", p(&certs.ca));
    runs(&at("127.0.0.1", &trusted));
    refused(&at("127.0.0.1", &client), UNKNOWN_CA, "127.0.0.1");
    refused(&at("127.0.0.2", &trusted), OTHER_NAME, "127.0.0.2");
    refused(
        &format!("redis://127.0.0.1:{}", server.port),
        "connect",
        "127.0.0.1",
    );
    // the server asks for a client certificate
    let anonymous = output(
        &at("127.0.0.1", &format!("tls-ca={}", p(&certs.ca))),
        &["run", &unique("tls"), "--", "true"],
    );
    assert_ne!(anonymous.status.code(), Some(0), "{}", said(&anonymous));
}

#[test]
fn postgres_verify_full_with_a_password_and_with_a_client_certificate() {
    let (dir, certs) = short_scratch("dlock-cli-pgtls");
    let server = TestServer::postgres_tls(&dir.0, &certs);
    let login = format!("dlock:{}", TestServer::PASSWORD_ENCODED);
    let at = |who: &str, host: &str, query: &str| {
        format!("postgres://{who}@{host}:{}/postgres?{query}", server.port)
    };
    let verify = format!("sslmode=verify-full&sslrootcert={}", p(&certs.ca));
    runs(&at(&login, "127.0.0.1", &verify));
    runs(&at(
        TestCerts::CLIENT,
        "127.0.0.1",
        &format!(
            "{verify}&sslcert={}&sslkey={}",
            p(&certs.client_cert),
            p(&certs.client_key)
        ),
    ));
    refused(
        &at(&login, "127.0.0.1", "sslmode=verify-full"),
        UNKNOWN_CA,
        "127.0.0.1",
    );
    refused(&at(&login, "127.0.0.2", &verify), OTHER_NAME, "127.0.0.2");
    let plain = output(
        &at(&login, "127.0.0.1", "sslmode=disable"),
        &["run", &unique("tls"), "--", "true"],
    );
    let err = said(&plain);
    assert_ne!(plain.status.code(), Some(0), "{err}");
    assert!(err.contains("no encryption"), "{err}");
    // and TLS asked of the shared server, which has none
    let shared = required_env("DLOCK_TEST_POSTGRES_URL");
    refused(&format!("{shared}?{verify}"), NO_TLS, "127.0.0.1");
}

#[test]
fn mariadb_verify_identity_with_a_password_and_with_a_client_certificate() {
    let (dir, certs) = short_scratch("dlock-cli-mytls");
    let server = TestServer::mariadb_tls(&dir.0, &certs);
    let login = format!("dlock:{}", TestServer::PASSWORD_ENCODED);
    let at =
        |who: &str, query: &str| format!("mysql://{who}@127.0.0.1:{}/dlock?{query}", server.port);
    let verify = format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={}", p(&certs.ca));
    runs(&at(&login, &verify));
    runs(&at(
        TestCerts::CLIENT,
        &format!(
            "{verify}&ssl-cert={}&ssl-key={}",
            p(&certs.client_cert),
            p(&certs.client_key)
        ),
    ));
    refused(
        &at(&login, "ssl-mode=VERIFY_IDENTITY"),
        UNKNOWN_CA,
        "127.0.0.1",
    );
    let plain = output(
        &at(&login, "ssl-mode=DISABLED"),
        &["run", &unique("tls"), "--", "true"],
    );
    let err = said(&plain);
    assert_ne!(plain.status.code(), Some(0), "{err}");
    let shared = required_env("DLOCK_TEST_MYSQL_URL");
    refused(&format!("{shared}?{verify}"), NO_TLS, "127.0.0.1");
    // the same account and password as the first run, refused over plain TCP
    // (require_secure_transport: MariaDB 10.11 answers "Access denied")
    assert!(err.contains("denied") || err.contains("insecure"), "{err}");
}
