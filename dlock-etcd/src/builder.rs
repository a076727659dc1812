//! [`EtcdLockBuilder`]: endpoints, prefix, timeout, credentials, then the connection.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::within;
use etcd_client::{Client, ConnectOptions};

use crate::EtcdLock;
use crate::errors::from_etcd;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "dlock/";

#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub prefix: String,
    pub timeout: Duration,
}

/// Builds an [`EtcdLock`] with a key prefix, a timeout and credentials.
#[derive(Clone)]
pub struct EtcdLockBuilder {
    endpoints: Vec<String>,
    opts: Options,
    user: Option<(String, String)>,
    tls_ca: Option<Vec<u8>>,
}

impl std::fmt::Debug for EtcdLockBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdLockBuilder")
            .field("endpoints", &self.endpoints)
            .field("opts", &self.opts)
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .field("tls_ca", &self.tls_ca.is_some())
            .finish()
    }
}

impl EtcdLockBuilder {
    pub(crate) fn new(endpoints: &[&str]) -> Self {
        Self {
            endpoints: endpoints.iter().map(|e| normalize(e)).collect(),
            opts: Options {
                prefix: DEFAULT_PREFIX.into(),
                timeout: Duration::from_secs(3),
            },
            user: None,
            tls_ca: None,
        }
    }

    /// Connects to `https://` endpoints trusting this CA certificate (PEM). Needs the
    /// crate's `tls` feature.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn tls_ca_pem(mut self, pem: &[u8]) -> Self {
        self.tls_ca = Some(pem.to_vec());
        self
    }

    /// The key prefix (default `dlock/`).
    #[must_use]
    pub fn prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.opts.prefix);
        self
    }

    /// How long one operation may take, retries on other endpoints included, before it
    /// fails with `Unavailable` (default 3 s).
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.opts.timeout = d;
        self
    }

    /// Authenticates as `user`.
    #[must_use]
    pub fn user(mut self, user: &str, password: &str) -> Self {
        self.user = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// Connects and checks that some endpoint answers.
    ///
    /// # Errors
    /// [`LockError::Config`] without endpoints; [`LockError::Unavailable`] when no
    /// endpoint answers within the timeout.
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn connect(self) -> Result<EtcdLock, LockError> {
        if self.endpoints.is_empty() {
            return Err(LockError::Config("etcd needs at least one endpoint".into()));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.opts.timeout)
            .with_timeout(self.opts.timeout)
            .with_keep_alive(Duration::from_secs(5), self.opts.timeout)
            // Every request, watches included, only through a member that has a leader:
            // a member cut off from its peers refuses reads and cancels watches instead
            // of answering from a copy that no longer moves.
            .with_require_leader(true);
        if let Some((u, p)) = &self.user {
            options = options.with_user(u.clone(), p.clone());
        }
        #[cfg(feature = "tls")]
        if let Some(ca) = &self.tls_ca {
            // rustls cannot pick a crypto back end by itself when both are compiled in
            let _ = rustls::crypto::ring::default_provider().install_default();
            options = options.with_tls(
                etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(ca)),
            );
        }
        let shown = self.endpoints.join(",");
        // a down cluster named at once, not after the client's retries
        let hosts: Vec<&str> = self
            .endpoints
            .iter()
            .map(|e| {
                e.split_once("://")
                    .map_or(e.as_str(), |(_, h)| h)
                    .trim_end_matches('/')
            })
            .collect();
        dlock_core::backend::any_reachable("etcd", &hosts, self.opts.timeout).await?;
        let what = format!("connecting to etcd {shown}");
        // boxed: the client's connect future is 17 kB, too large to carry inline
        let client = within(self.opts.timeout, &what, async {
            Box::pin(Client::connect(&self.endpoints, Some(options)))
                .await
                .map_err(|e| from_etcd(&what, e))
        })
        .await?;
        let lock = EtcdLock {
            watches: Arc::new(crate::watches::Watches::new(client.clone())),
            client,
            opts: Arc::new(self.opts),
            leases: Arc::default(),
        };
        crate::session::sweeper::start(
            Arc::downgrade(&lock.leases),
            lock.client.clone(),
            lock.opts.timeout,
        );
        // The client connects lazily: make sure something answers before handing it out.
        lock.rpc(
            "probe",
            |mut c| async move { c.get("dlock-probe", None).await },
        )
        .await?;
        Ok(lock)
    }
}

fn normalize(endpoint: &str) -> String {
    if endpoint.contains("://") {
        endpoint.to_owned()
    } else {
        format!("http://{endpoint}")
    }
}
