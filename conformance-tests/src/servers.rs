//! Faults on the real test servers and on clients' network paths.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{FaultProxy, Link, required_env};

/// Runs `scripts/services ctl $DLOCK_SVC_DIR ACTION NAMES...` (kill, stop, start,
/// restart, pause, resume) on the servers `scripts/services up` started.
///
/// # Panics
/// When `DLOCK_SVC_DIR` is unset or the action fails: a fault test must not pass
/// without its fault.
pub async fn services_ctl(action: &str, names: &[&str]) {
    let dir = required_env("DLOCK_SVC_DIR");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services");
    let mut cmd = tokio::process::Command::new(script);
    cmd.arg("ctl").arg(dir).arg(action).args(names);
    let status = cmd.status().await;
    assert!(
        status.as_ref().is_ok_and(std::process::ExitStatus::success),
        "scripts/services ctl {action} {names:?} failed: {status:?}"
    );
}

/// Proxies in front of each of several servers, cut and healed together.
pub struct ProxyGroup(pub Vec<Arc<FaultProxy>>);

impl ProxyGroup {
    /// One proxy per `host:port`; returns the proxies' addresses in the same order.
    ///
    /// # Panics
    /// When a loopback port cannot be bound.
    pub async fn start(hosts: &[&str]) -> (Vec<String>, Self) {
        let mut addrs = Vec::new();
        let mut proxies = Vec::new();
        for h in hosts {
            let p = Arc::new(FaultProxy::start(h).await.expect("bind a loopback port"));
            addrs.push(p.addr().to_string());
            proxies.push(p);
        }
        (addrs, Self(proxies))
    }

    /// Sets every proxy's mode.
    pub fn set_mode(&self, mode: crate::FaultMode) {
        for p in &self.0 {
            p.set_mode(mode);
        }
    }
}

#[async_trait]
impl Link for ProxyGroup {
    async fn cut(&self) {
        self.set_mode(crate::FaultMode::Blackhole);
    }
    async fn heal(&self) {
        self.set_mode(crate::FaultMode::Pass);
    }
    fn requests(&self) -> Option<u64> {
        Some(self.0.iter().map(|p| FaultProxy::requests(p)).sum())
    }
}

/// A throwaway certificate authority, a server certificate for `127.0.0.1` and
/// `localhost`, and a client certificate for the user [`TestCerts::CLIENT`], made with
/// the `openssl` command line in `dir`.
#[derive(Clone, Debug)]
pub struct TestCerts {
    /// The CA certificate (PEM), for the client to trust.
    pub ca_pem: Vec<u8>,
    /// Path of the CA certificate.
    pub ca: std::path::PathBuf,
    /// Path of the server certificate.
    pub cert: std::path::PathBuf,
    /// Path of the server's private key.
    pub key: std::path::PathBuf,
    /// Path of the client certificate (its subject `CN=`[`TestCerts::CLIENT`]).
    pub client_cert: std::path::PathBuf,
    /// Path of the client's private key.
    pub client_key: std::path::PathBuf,
}

impl TestCerts {
    /// The user name the client certificate is for.
    pub const CLIENT: &'static str = "dlock_cert";

    /// Makes the certificates in a new scratch directory named after `label`: the
    /// directory (for the server's other files) and the certificates.
    ///
    /// # Panics
    /// As [`TestCerts::make`], and when the directory cannot be made.
    #[must_use]
    pub fn in_scratch(label: &str) -> (std::path::PathBuf, Self) {
        let dir = std::env::temp_dir().join(format!("{label}-{:016x}", dlock_core::random_u64()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let certs = Self::make(&dir);
        (dir, certs)
    }

    /// Makes the certificates.
    ///
    /// # Panics
    /// When `openssl` fails or is missing (`scripts/services` installs it).
    #[must_use]
    pub fn make(dir: &std::path::Path) -> Self {
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .expect("the openssl command line (Debian package openssl)");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        run(&[
            &["req", "-x509"],
            &ec[..],
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=dlock test CA",
            ],
        ]
        .concat());
        run(&[
            &["req"],
            &ec[..],
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat());
        std::fs::write(
            dir.join("san.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .expect("write san.cnf");
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "san.cnf",
        ]);
        // an extension makes it X.509 v3, which rustls requires of every certificate
        std::fs::write(dir.join("client.cnf"), "extendedKeyUsage=clientAuth\n")
            .expect("write client.cnf");
        let subject = format!("/CN={}", Self::CLIENT);
        run(&[
            &["req"],
            &ec[..],
            &[
                "-keyout",
                "client.key",
                "-out",
                "client.csr",
                "-subj",
                &subject,
            ],
        ]
        .concat());
        run(&[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "client.crt",
            "-days",
            "2",
            "-extfile",
            "client.cnf",
        ]);
        Self {
            client_cert: dir.join("client.crt"),
            client_key: dir.join("client.key"),
            ca_pem: std::fs::read(dir.join("ca.crt")).expect("read ca.crt"),
            ca: dir.join("ca.crt"),
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        }
    }
}

/// A server process started by a test, killed when dropped.
pub struct TestServer {
    child: std::process::Child,
    /// The loopback port it serves on.
    pub port: u16,
}

impl TestServer {
    /// Starts `program args...` (every `{port}` in them replaced by a free port) and
    /// waits until the port accepts connections.
    ///
    /// # Panics
    /// When the program cannot start, exits, or does not listen within 30 s.
    #[must_use]
    pub fn start(program: &str, args: &[String]) -> Self {
        let port = free_port();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{port}", &port.to_string()))
            .collect();
        Self::start_on(program, &args, port)
    }

    /// Starts `program args...` and waits until `port` (which its arguments or files
    /// name) accepts connections.
    ///
    /// # Panics
    /// When the program cannot start, exits, or does not listen within 30 s.
    #[must_use]
    pub fn start_on(program: &str, args: &[String], port: u16) -> Self {
        Self::start_on_with(program, args, port, &[])
    }

    /// As [`TestServer::start_on`], with `env` added to the program's environment (a
    /// faked clock's preload, say).
    ///
    /// # Panics
    /// As [`TestServer::start_on`].
    #[must_use]
    pub fn start_on_with(
        program: &str,
        args: &[String],
        port: u16,
        env: &[(String, String)],
    ) -> Self {
        let mut cmd = std::process::Command::new(program);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        for (k, _) in std::env::vars() {
            if k.starts_with("ETCD") {
                cmd.env_remove(k); // ETCD_* in the environment would change etcd's flags
            }
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}"));
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{program} exited ({status}) before listening on {port}");
            }
            assert!(
                std::time::Instant::now() < end,
                "{program} did not listen on {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Self { child, port }
    }
}

impl TestServer {
    /// A private `redis-server` on a free loopback port, without persistence, keeping
    /// its files in `dir`, with `extra` arguments after the common ones.
    ///
    /// # Panics
    /// As [`TestServer::start`].
    #[must_use]
    pub fn redis(dir: &std::path::Path, extra: &[&str]) -> Self {
        let mut args: Vec<String> = ["--port", "{port}", "--bind", "127.0.0.1", "--save", ""]
            .iter()
            .chain(&["--appendonly", "no", "--dir"])
            .map(|a| (*a).to_owned())
            .collect();
        args.push(dir.display().to_string());
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        Self::start("redis-server", &args)
    }
}

impl TestServer {
    /// Kills the server (SIGKILL) and waits for it; dropping it afterwards does nothing
    /// more.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on right now, below the kernel's ephemeral range and the
/// shared services' block (27000–31999).
///
/// Ports from the ephemeral range (what binding port 0 gives) are also what every
/// outgoing connection on the machine borrows: between this check and the server's
/// own bind, a client socket of a parallel test could take it, and the server would
/// fail to start. Below 27000 only listeners compete, and each process walks its own
/// stretch of the range.
///
/// # Panics
/// When no port in the range can be bound.
#[must_use]
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 10_000;
    const SPAN: u32 = 17_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let seed = std::process::id().wrapping_mul(2_654_435_761)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
    let _ = NEXT.compare_exchange(u32::MAX, seed % SPAN, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..SPAN {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % SPAN;
        let port = u16::try_from(LOW + offset).expect("below 27000");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between {LOW} and {}", LOW + SPAN)
}
