//! `zk://[user:password@]host1:2181,host2:2181[/chroot][?session_timeout=…&timeout=…&root=…]`.

use dlock_core::backend::take_query;
use dlock_core::{LockError, parse_duration, redact_url};

use crate::ZkLock;

impl ZkLock {
    /// Connects with a lock URL, `zk://[user:password@]host1:2181,host2:2181[/chroot]`,
    /// with dlock's parameters `session_timeout`, `timeout`, `root` and `layout`
    /// (`dlock` or `curator`, see [`crate::ZkLockBuilder::layout`]; any other is
    /// refused).
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dlock_core::LockError> {
    /// let locks = dlock_zk::ZkLock::from_url("zk://10.0.0.1:2181/app?timeout=2s").await?;
    /// # let _ = locks; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Config`] for a malformed URL or an unknown parameter;
    /// [`LockError::Unavailable`] when no server answers.
    ///
    /// # Cancel safety
    /// Dropping it before it completes takes no lock: what it opened so far
    /// (connections, a session) closes with it; what it created (the lock table, a
    /// ZooKeeper root node) stays, and creating it again is harmless.
    pub async fn from_url(url: &str) -> Result<Self, LockError> {
        let shown = redact_url(url);
        let (mut session_timeout, mut timeout, mut root) = (None, None, None);
        let mut layout = None;
        let plain = take_query(url, |k, v| {
            let duration = || parse_duration(v).map_err(|e| e.to_string());
            match k {
                "session_timeout" => session_timeout = Some(duration()?),
                "timeout" => timeout = Some(duration()?),
                "root" => root = Some(v.to_owned()),
                "layout" => layout = Some(v.parse().map_err(|e: LockError| e.to_string())?),
                _ => {
                    return Err(
                        "unknown ZooKeeper parameter (known: session_timeout, timeout, root, layout)"
                            .into(),
                    );
                }
            }
            Ok(true)
        })?;
        let rest = plain.split_once("://").map_or("", |(_, r)| r);
        let (user, addr) = match rest.rsplit_once('@') {
            Some((u, a)) => (Some(dlock_core::backend::credentials(u)?), a),
            None => (None, rest),
        };
        if addr.is_empty() || addr.starts_with('/') {
            return Err(LockError::Config(format!(
                "{shown:?} is not a ZooKeeper URL: use zk://host1:2181,host2:2181[/chroot]"
            )));
        }
        let mut builder = Self::builder(addr);
        if let Some((u, p)) = &user {
            builder = builder.auth(u, p);
        }
        if let Some(d) = session_timeout {
            builder = builder.session_timeout(d);
        }
        if let Some(d) = timeout {
            builder = builder.timeout(d);
        }
        if let Some(r) = root {
            builder = builder.root(&r);
        }
        if let Some(l) = layout {
            builder = builder.layout(l);
        }
        builder.connect().await
    }
}
