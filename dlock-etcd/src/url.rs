//! `etcd://[user:password@]host1:2379,host2:2379[?prefix=…&timeout=…]`.

use dlock_core::backend::take_query;
use dlock_core::{LockError, parse_duration, redact_url};

use crate::EtcdLock;

impl EtcdLock {
    /// Connects with a lock URL, `etcd://[user:password@]host1:2379,host2:2379`, with
    /// dlock's parameters `prefix` and `timeout` (any other is refused).
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dlock_core::LockError> {
    /// let locks = dlock_etcd::EtcdLock::from_url("etcd://10.0.0.1:2379,10.0.0.2:2379?timeout=2s").await?;
    /// # let _ = locks; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Config`] for a malformed URL or an unknown parameter;
    /// [`LockError::Unavailable`] when no endpoint answers.
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn from_url(url: &str) -> Result<Self, LockError> {
        let shown = redact_url(url);
        let mut prefix = None;
        let mut timeout = None;
        let plain = take_query(url, |k, v| {
            match k {
                "prefix" => prefix = Some(v.to_owned()),
                "timeout" => timeout = Some(parse_duration(v).map_err(|e| e.to_string())?),
                _ => return Err("unknown etcd parameter (known: prefix, timeout)".into()),
            }
            Ok(true)
        })?;
        let authority = plain
            .split_once("://")
            .map_or("", |(_, r)| r)
            .trim_end_matches('/');
        let (user, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(dlock_core::backend::credentials(u)?), h),
            None => (None, authority),
        };
        let endpoints: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| format!("http://{h}"))
            .collect();
        if endpoints.is_empty() || hosts.contains('/') {
            return Err(LockError::Config(format!(
                "{shown:?} is not an etcd URL: use etcd://host1:2379,host2:2379"
            )));
        }
        let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
        let mut builder = Self::builder(&endpoints);
        if let Some((u, p)) = &user {
            builder = builder.user(u, p);
        }
        if let Some(p) = prefix {
            builder = builder.prefix(&p);
        }
        if let Some(t) = timeout {
            builder = builder.timeout(t);
        }
        builder.connect().await
    }
}
