//! `redlock://[userinfo@]h1:p,h2:p,h3:p[/db][?query]`: one `redis://` URL per host.

use dlock_core::{LockError, redact_url};

use crate::{RedisLock, Redlock};

impl RedisLock {
    /// Connects with a lock URL, `redis://…`, `rediss://…`, `redis-sentinel://…` or `redis-cluster://…` (as
    /// [`RedisLock::connect`]).
    ///
    /// # Errors
    /// See [`RedisLock::connect`].
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn from_url(url: &str) -> Result<Self, LockError> {
        Self::connect(url).await
    }
}

impl Redlock {
    /// Connects with a lock URL, `redlock://[user:password@]h1:6379,h2:6379,h3:6379[/db]`,
    /// the credentials, database and parameters (`prefix`, `timeout`) applying to every
    /// node.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dlock_core::LockError> {
    /// let locks = dlock_redis::Redlock::from_url("redlock://r1:6379,r2:6379,r3:6379").await?;
    /// assert_eq!(locks.quorum(), 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Config`] for a URL naming no hosts or a malformed one.
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn from_url(url: &str) -> Result<Self, LockError> {
        let urls = node_urls(url)?;
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        Self::connect(&urls).await
    }
}

/// One `redis://` URL per host of a `redlock://` URL, keeping credentials and options.
fn node_urls(url: &str) -> Result<Vec<String>, LockError> {
    let (userinfo, hosts, tail) = split_hosts(url);
    if hosts.is_empty() {
        return Err(LockError::Config(format!(
            "{:?} names no Redis hosts: use redlock://h1:6379,h2:6379,h3:6379",
            redact_url(url)
        )));
    }
    Ok(hosts
        .iter()
        .map(|h| format!("redis://{userinfo}{h}{tail}"))
        .collect())
}

/// A multi-host URL `scheme://[userinfo@]h1,h2[/path][?query]` as its userinfo (with
/// the `@`, or empty), its hosts and the rest (path and query).
pub(crate) fn split_hosts(url: &str) -> (String, Vec<&str>, &str) {
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(split);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let hosts = hosts.split(',').filter(|h| !h.is_empty()).collect();
    (userinfo, hosts, tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_urls_split_per_host_keeping_credentials_and_options() {
        assert_eq!(
            node_urls("redlock://:pw@a:1,b:2,c:3/0?prefix=x:").unwrap(),
            [
                "redis://:pw@a:1/0?prefix=x:",
                "redis://:pw@b:2/0?prefix=x:",
                "redis://:pw@c:3/0?prefix=x:"
            ]
        );
        assert!(matches!(node_urls("redlock://"), Err(LockError::Config(_))));
    }
}
