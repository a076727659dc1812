//! [`ZkLockBuilder`]: hosts and chroot, root node, session and operation timeouts,
//! credentials, then the session and the root node.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::within;

use crate::{DEFAULT_ROOT, NodeLayout, ZkLock, errors, session, sessions};

/// Builds a [`ZkLock`] with root, session timeout, operation timeout and credentials.
#[derive(Clone)]
pub struct ZkLockBuilder {
    hosts: String,
    chroot: String,
    root: String,
    session_timeout: Duration,
    pinned: bool,
    op_timeout: Duration,
    auth: Option<Vec<u8>>,
    layout: NodeLayout,
}

impl std::fmt::Debug for ZkLockBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkLockBuilder")
            .field("hosts", &self.hosts)
            .field("chroot", &self.chroot)
            .field("root", &self.root)
            .field("session_timeout", &self.session_timeout)
            .field("auth", &self.auth.is_some())
            .finish_non_exhaustive()
    }
}

impl ZkLockBuilder {
    /// The defaults for `host:port[,host:port...][/chroot]`.
    pub(crate) fn new(addr: &str) -> Self {
        let (hosts, chroot) = match addr.find('/') {
            Some(i) => (&addr[..i], addr[i..].trim_end_matches('/')),
            None => (addr, ""),
        };
        Self {
            hosts: hosts.to_owned(),
            chroot: chroot.to_owned(),
            root: DEFAULT_ROOT.into(),
            session_timeout: Duration::from_secs(10),
            pinned: false,
            op_timeout: Duration::from_secs(5),
            auth: None,
            layout: NodeLayout::Dlock,
        }
    }

    /// The root node under the chroot (default `/dlock`).
    #[must_use]
    pub fn root(mut self, root: &str) -> Self {
        self.root = format!("/{}", root.trim_matches('/'));
        self
    }

    /// One session timeout for every lock, whatever TTL it is asked for (the server
    /// clamps it to its `[minSessionTimeout, maxSessionTimeout]`).
    ///
    /// Without it, a lock goes on a session whose timeout is the TTL it was asked for
    /// (one session per TTL, opened on first use), so a crashed holder's lock is freed
    /// after its TTL; the session opened at connect then has a 10 s timeout.
    #[must_use]
    pub fn session_timeout(mut self, d: Duration) -> Self {
        self.session_timeout = d;
        self.pinned = true;
        self
    }

    /// How the mutex's contender nodes are named (default [`NodeLayout::Dlock`];
    /// `layout=curator` in the URL). [`NodeLayout::Curator`] shares locks with Apache
    /// Curator's `InterProcessMutex` on the same path (`root` + `/` + name): one FIFO
    /// queue, each side waiting for the other. Every client of a lock must use the same
    /// layout: a dlock client on the default layout orders Curator's nodes correctly,
    /// but Curator sorts dlock's default node names by their random owner id — a
    /// Curator client can then hold while a dlock client does, which breaks mutual
    /// exclusion.
    #[must_use]
    pub fn layout(mut self, layout: NodeLayout) -> Self {
        self.layout = layout;
        self
    }

    /// How long one operation may take before it fails with `Unavailable` (default 5 s).
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d;
        self
    }

    /// Digest credentials; lock nodes then carry the `creator_all` ACL.
    #[must_use]
    pub fn auth(mut self, user: &str, password: &str) -> Self {
        self.auth = Some(format!("{user}:{password}").into_bytes());
        self
    }

    /// Opens a session and creates the root node if missing.
    ///
    /// # Errors
    /// [`LockError::Config`] for a malformed address, [`LockError::Unavailable`] when
    /// no server answers.
    ///
    /// # Cancel safety
    /// Dropping it before it completes takes no lock: what it opened so far
    /// (connections, a session) closes with it; what it created (the lock table, a
    /// ZooKeeper root node) stays, and creating it again is harmless.
    pub async fn connect(self) -> Result<ZkLock, LockError> {
        if self.hosts.is_empty() || self.hosts.split(',').any(|h| h.trim().is_empty()) {
            return Err(LockError::Config(format!(
                "{:?} is not a ZooKeeper address: use host:port[,host:port...][/chroot]",
                self.hosts
            )));
        }
        let sessions = sessions::Sessions::open(
            session::Params {
                hosts: self.hosts,
                session_timeout: self.session_timeout,
                op_timeout: self.op_timeout,
                auth: self.auth,
            },
            self.pinned,
        )
        .await?;
        let lock = ZkLock {
            sessions: Arc::new(sessions),
            root: format!("{}{}", self.chroot, self.root),
            layout: self.layout,
        };
        let client = lock.sessions.first().session.get().await?;
        let mode = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        let what = format!("creating {}", lock.root);
        within(self.op_timeout, &what, async {
            client
                .mkdir(&lock.root, &mode)
                .await
                .map_err(|e| errors::from_zk(&what, e))
        })
        .await?;
        Ok(lock)
    }
}
