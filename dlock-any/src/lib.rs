//! # dlock-any
//!
//! One dependency for services: the [`dlock_core`] API re-exported, every backend
//! behind a cargo feature, and [`connect`], which picks the backend from a URL so the
//! choice is configuration, not code.
//!
//! | URL | backend | feature |
//! |---|---|---|
//! | `memory://` | [`MemoryLock`] (this process only; each `connect` is a new table) | always |
//! | `sqlite://path/to/file.db` | SQLite file, created if missing | `sqlite` (default) |
//! | `postgres://user:pw@host:5432/db` | PostgreSQL | `postgres` |
//! | `mysql://user:pw@host:3306/db`, `mariadb://…` | MySQL / MariaDB | `mysql` |
//! | `redis://[user:pw@]host:6379[/db]`, `rediss://…` (TLS) | one Redis server | `redis` |
//! | `redlock://[user:pw@]h1:p,h2:p,h3:p[/db]` | Redlock over independent Redis masters | `redis` |
//!
//! | `etcd://[user:pw@]h1:2379,h2:2379` | etcd v3 cluster members | `etcd` (needs `protoc` to build) |
//! | `zk://[user:pw@]h1:2181,h2:2181[/chroot]` (`zookeeper://`) | ZooKeeper ensemble | `zookeeper` |
//!
//! Redis URLs take `prefix` (default `dlock:`) and `timeout` (per command, e.g. `2s`;
//! per node for Redlock, default 250 ms); etcd URLs take `prefix` (default `dlock/`) and
//! `timeout` (per operation, retries included, default 3 s); ZooKeeper URLs take
//! `session_timeout` (one session timeout for every lock; without it each TTL gets a
//! session whose timeout is that TTL), `timeout` (per operation,
//! default 5 s) and `root` (default `/dlock`), and digest credentials as user:password.
//!
//! SQL URLs take dlock's own query parameters too: `table`, `pool_size`,
//! `op_timeout` (e.g. `2s`), `poll_max` (e.g. `100ms`), `listen` (`true`/`false`).
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use dlock_any::{DistributedLock, Locker};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_any::LockError> {
//! // e.g. from configuration: "postgres://app@db/app", "sqlite:///var/lib/app/locks.db"
//! let backend: Arc<dyn DistributedLock> = dlock_any::connect("memory://").await?;
//! let locker = Locker::new(backend).with_ttl(Duration::from_secs(30));
//! let guard = locker.lock("billing/invoice-7").await?;
//! println!("fencing token {}", guard.token());
//! guard.release().await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

pub use dlock_core::*;

#[cfg(feature = "etcd")]
pub use dlock_etcd::EtcdLock;
#[cfg(feature = "redis")]
pub use dlock_redis::{RedisLock, Redlock};
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use dlock_sql::{SqlLock, SqlLockBuilder};
#[cfg(feature = "zookeeper")]
pub use dlock_zk::ZkLock;

/// Connects to the backend the URL names (see the table above), wrapped in
/// [`Instrumented`]: every operation gets a `tracing` span and the metrics listed in
/// [`metric_names`] (collected by whatever `metrics` recorder the program installs).
///
/// # Errors
/// [`LockError::Config`] for a malformed URL, an unknown scheme, or a scheme whose
/// cargo feature is off (the message names the feature);
/// [`LockError::Unavailable`] when the server cannot be reached.
pub async fn connect(url: &str) -> Result<Arc<dyn DistributedLock>, LockError> {
    let backend = connect_backend(url).await?;
    Ok(Arc::new(Instrumented::new(backend)))
}

async fn connect_backend(url: &str) -> Result<Arc<dyn DistributedLock>, LockError> {
    let shown = redact_url(url);
    let Some((scheme, _)) = url.split_once("://").or_else(|| url.split_once(':')) else {
        return Err(LockError::Config(format!(
            "{shown:?} is not a lock URL: it has no scheme (try sqlite:///path/locks.db, postgres://host/db or memory://)"
        )));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "memory" => Ok(Arc::new(MemoryLock::new())),
        "postgres" | "postgresql" => sql(url, "postgres", cfg!(feature = "postgres")).await,
        "mysql" | "mariadb" => sql(url, "mysql", cfg!(feature = "mysql")).await,
        "sqlite" => sql(url, "sqlite", cfg!(feature = "sqlite")).await,
        "redis" | "rediss" => redis(url, false).await,
        "redlock" => redis(url, true).await,
        "etcd" => etcd(url).await,
        "zk" | "zookeeper" => zookeeper(url).await,
        other => Err(LockError::Config(format!(
            "{shown:?}: unknown scheme {other:?}; known: memory, sqlite, postgres, postgresql, mysql, mariadb, redis, rediss, redlock, etcd, zk, zookeeper"
        ))),
    }
}

async fn sql(
    url: &str,
    feature: &str,
    enabled: bool,
) -> Result<Arc<dyn DistributedLock>, LockError> {
    if !enabled {
        return Err(feature_off(url, feature));
    }
    #[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
    {
        Ok(Arc::new(dlock_sql::SqlLock::connect(url).await?))
    }
    #[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
    {
        Err(feature_off(url, feature))
    }
}

#[cfg(feature = "redis")]
async fn redis(url: &str, quorum: bool) -> Result<Arc<dyn DistributedLock>, LockError> {
    if quorum {
        let urls = redlock_urls(url)?;
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        Ok(Arc::new(dlock_redis::Redlock::connect(&urls).await?))
    } else {
        Ok(Arc::new(dlock_redis::RedisLock::connect(url).await?))
    }
}

#[cfg(not(feature = "redis"))]
async fn redis(url: &str, _quorum: bool) -> Result<Arc<dyn DistributedLock>, LockError> {
    Err(feature_off(url, "redis"))
}

#[cfg(feature = "etcd")]
async fn etcd(url: &str) -> Result<Arc<dyn DistributedLock>, LockError> {
    let shown = redact_url(url);
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = rest.trim_end_matches('/');
    let (user, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.split_once(':').unwrap_or((u, ""))), h),
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
    let mut builder = dlock_etcd::EtcdLock::builder(&endpoints);
    if let Some((u, p)) = user {
        builder = builder.user(u, p);
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("prefix", v) => builder = builder.prefix(v),
            ("timeout", v) => {
                let d = parse_duration(v)
                    .map_err(|_| LockError::Config(format!("bad timeout in {shown:?}: {v}")))?;
                builder = builder.timeout(d);
            }
            (k, _) => {
                return Err(LockError::Config(format!(
                    "{shown:?}: unknown etcd option {k:?} (known: prefix, timeout)"
                )));
            }
        }
    }
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "etcd"))]
async fn etcd(url: &str) -> Result<Arc<dyn DistributedLock>, LockError> {
    Err(feature_off(url, "etcd"))
}

#[cfg(feature = "zookeeper")]
async fn zookeeper(url: &str) -> Result<Arc<dyn DistributedLock>, LockError> {
    let shown = redact_url(url);
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (user, addr) = match rest.rsplit_once('@') {
        Some((u, a)) => (Some(u.split_once(':').unwrap_or((u, ""))), a),
        None => (None, rest),
    };
    if addr.is_empty() || addr.starts_with('/') {
        return Err(LockError::Config(format!(
            "{shown:?} is not a ZooKeeper URL: use zk://host1:2181,host2:2181[/chroot]"
        )));
    }
    let mut builder = dlock_zk::ZkLock::builder(addr);
    if let Some((u, p)) = user {
        builder = builder.auth(u, p);
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let duration = || {
            parse_duration(v).map_err(|_| LockError::Config(format!("bad {k} in {shown:?}: {v}")))
        };
        builder = match k {
            "session_timeout" => builder.session_timeout(duration()?),
            "timeout" => builder.timeout(duration()?),
            "root" => builder.root(v),
            _ => {
                return Err(LockError::Config(format!(
                    "{shown:?}: unknown ZooKeeper option {k:?} (known: session_timeout, timeout, root)"
                )));
            }
        };
    }
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "zookeeper"))]
async fn zookeeper(url: &str) -> Result<Arc<dyn DistributedLock>, LockError> {
    Err(feature_off(url, "zookeeper"))
}

/// `redlock://[userinfo@]h1:p,h2:p,h3:p[/db][?query]` as one `redis://` URL per host.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
fn redlock_urls(url: &str) -> Result<Vec<String>, LockError> {
    let shown = redact_url(url);
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(split);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
    if hosts.is_empty() {
        return Err(LockError::Config(format!(
            "{shown:?} names no Redis hosts: use redlock://h1:6379,h2:6379,h3:6379"
        )));
    }
    Ok(hosts
        .iter()
        .map(|h| format!("redis://{userinfo}{h}{tail}"))
        .collect())
}

fn feature_off(url: &str, feature: &str) -> LockError {
    LockError::Config(format!(
        "{:?} needs the `{feature}` backend: enable dlock-any's cargo feature `{feature}`",
        redact_url(url)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redlock_urls_split_per_host_keeping_credentials_and_options() {
        assert_eq!(
            redlock_urls("redlock://:pw@a:1,b:2,c:3/0?prefix=x:").unwrap(),
            [
                "redis://:pw@a:1/0?prefix=x:",
                "redis://:pw@b:2/0?prefix=x:",
                "redis://:pw@c:3/0?prefix=x:"
            ]
        );
        assert!(matches!(
            redlock_urls("redlock://"),
            Err(LockError::Config(_))
        ));
    }

    #[test]
    fn feature_off_names_the_feature_and_hides_the_password() {
        let e = feature_off("postgres://u:secret@h/db", "postgres");
        let msg = e.to_string();
        assert!(matches!(e, LockError::Config(_)));
        assert!(
            msg.contains("cargo feature `postgres`") && !msg.contains("secret"),
            "{msg}"
        );
    }
}
