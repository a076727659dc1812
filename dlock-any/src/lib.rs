//! # dlock-any
//!
//! One dependency for services: the [`dlock_core`] API re-exported, every backend
//! behind a cargo feature, and [`connect`], which picks the backend from a URL so the
//! choice is configuration, not code.
//!
//! | URL | backend | feature |
//! |---|---|---|
//! | `memory://` | [`MemoryLock`] (this process only; each `connect` is a new table) | always |
//! | `sqlite://path/to/file.db` | SQLite file, created if missing | `sqlite` |
//! | `postgres://user:pw@host:5432/db` | PostgreSQL | `postgres` |
//! | `mysql://user:pw@host:3306/db`, `mariadb://…` | MySQL / MariaDB | `mysql` |
//! | `redis://[user:pw@]host:6379[/db]`, `rediss://…` (TLS) | one Redis server | `redis` |
//! | `redis-sentinel://[user:pw@]s1:p,s2:p/mastername[/db]` | the master Redis Sentinel names, followed across failovers | `redis` |
//! | `redis-cluster://[user:pw@]h1:p,h2:p` | Redis Cluster: each lock on its slot's master | `redis` |
//! | `redlock://[user:pw@]h1:p,h2:p,h3:p[/db]` | Redlock over independent Redis masters | `redis` |
//! | `etcd://[user:pw@]h1:2379,h2:2379` | etcd v3 cluster members | `etcd` (needs `protoc` to build) |
//! | `zk://[user:pw@]h1:2181,h2:2181[/chroot]` (`zookeeper://`) | ZooKeeper ensemble | `zookeeper` |
//!
//! Redis URLs take `prefix` (default `dlock:`), `layout` (`tagged`, the default, or
//! `plain`: the lock key is the prefix plus the name — with `prefix=` empty, the key the
//! `SET NX` family of clients takes for the same name) and `timeout` (per command, e.g. `2s`; per node for Redlock, default
//! 250 ms); etcd URLs take `prefix` (default `dlock/`; empty to share locks with
//! `etcdctl lock`) and `timeout` (per operation, retries included, default 3 s);
//! ZooKeeper URLs take `session_timeout` (one session timeout for every lock; without it
//! each TTL gets a session whose timeout is that TTL), `timeout` (per operation, default
//! 5 s), `root` (default `/dlock`) and `layout` (`dlock`, the default, or `curator`:
//! nodes named as Curator's `InterProcessMutex` names them, one queue with it), and
//! digest credentials as user:password.
//!
//! Each adapter reads its own URL (`SqlLock::connect`, `RedisLock::from_url`,
//! `Redlock::from_url`, `EtcdLock::from_url`, `ZkLock::from_url`); [`connect`] only
//! picks the adapter by scheme. Every backend refuses a query parameter that is neither
//! dlock's nor one its client library reads (Redis: `protocol`; PostgreSQL and MySQL:
//! sqlx's `sslmode`, `application_name`, `charset`, …; SQLite: `mode`, `cache`, …), so
//! a typo is a `Config` error rather than a silent default.
//!
//! Every URL takes `fallback=` (`fail-fast`, the default; `local`; `proceed`): what
//! acquisitions do while the lock service is unavailable — see [`Fallback`] and
//! [`FallbackLock`]. With `local` or `proceed`, a service starts even if the lock
//! service cannot be reached at start-up, and connects once it can.
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

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod blocking;
mod credentials;
mod tls;
pub use credentials::{check_credentials, hide_password, with_password};
pub use tls::explained as explain_tls;

use std::sync::Arc;

pub use dlock_core::*;

#[cfg(feature = "etcd")]
pub use dlock_etcd::EtcdLock;
#[cfg(feature = "redis")]
pub use dlock_redis::{RedisFence, RedisLock, RedisResults, Redlock};
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use dlock_sql::{
    Pruned, Schema, SqlFence, SqlLock, SqlLockBuilder, SqlResults, fence as sql_fence,
};
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
///
/// # Cancel safety
/// Dropping it before it completes takes no lock: what it opened so far (connections, a
/// session) closes with it; what it created (the lock table, a ZooKeeper root node)
/// stays, and creating it again is harmless.
pub async fn connect(url: &str) -> Result<Arc<dyn DistributedLock>, LockError> {
    let backend = connect_coordination(url).await?;
    Ok(Arc::new(Instrumented::new(backend)))
}

/// Connects to the backend the URL names with all its primitives: the mutex,
/// semaphores and read-write locks ([`Coordination`]). For guards over a semaphore's
/// permits or one side of a read-write lock, wrap it in a [`SharedLock`] and hand that
/// to a [`Locker`] (and to [`Instrumented`] for spans and metrics).
///
/// ```
/// use std::sync::Arc;
/// use dlock_any::{Locker, SharedLock};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_any::LockError> {
/// let backend = dlock_any::connect_coordination("memory://").await?;
/// let pool = Locker::new(Arc::new(SharedLock::permits(backend, 4)?));
/// let permit = pool.lock("exports/daily").await?; // one of four at a time
/// permit.release().await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`connect`].
///
/// # Cancel safety
/// Dropping it before it completes takes no lock: what it opened so far (connections, a
/// session) closes with it; what it created (the lock table, a ZooKeeper root node)
/// stays, and creating it again is harmless.
pub async fn connect_coordination(url: &str) -> Result<Arc<dyn Coordination>, LockError> {
    check_credentials(url)?;
    let filled = with_password(url)?;
    let url = filled.as_str();
    let original = url.to_owned();
    let scrub = move |e: LockError| tls::explained(hide_password(e, &original));
    let mut fallback = Fallback::FailFast;
    let url = backend::take_query(url, |k, v| match k {
        "fallback" => {
            fallback = v.parse().map_err(|e: LockError| e.to_string())?;
            Ok(true)
        }
        _ => Ok(false),
    })?;
    if fallback == Fallback::FailFast {
        return connect_backend(&url).await.map_err(scrub);
    }
    tracing::warn!(url = %redact_url(&url), %fallback, "lock service outages will be served by the fallback");
    match connect_backend(&url).await {
        Ok(inner) => Ok(Arc::new(FallbackLock::new(inner, fallback))),
        Err(e @ LockError::Unavailable { .. }) => {
            let e = scrub(e);
            tracing::warn!(error = %e, %fallback, "lock service unreachable at start: connecting again on use");
            let connector: Connector = Arc::new(move || {
                let url = url.clone();
                let scrub = scrub.clone();
                Box::pin(async move {
                    connect_backend(&url)
                        .await
                        .map(|c| c as Arc<dyn DistributedLock>)
                        .map_err(scrub)
                })
            });
            Ok(Arc::new(FallbackLock::connecting(connector, fallback)))
        }
        Err(e) => Err(scrub(e)),
    }
}

/// The fallback policy `url` asks for (`fallback=`; [`Fallback::FailFast`] when it
/// names none), without connecting: for a caller that must refuse some policies before
/// it takes anything (`dlock run` refuses `local`, which excludes nobody across
/// processes, and runs under `proceed` only when told to).
///
/// ```
/// use dlock_any::Fallback;
/// assert_eq!(dlock_any::fallback_of("redis://h:6379?fallback=proceed")?, Fallback::Proceed);
/// assert_eq!(dlock_any::fallback_of("sqlite:///tmp/x.db")?, Fallback::FailFast);
/// assert!(dlock_any::fallback_of("redis://h?fallback=maybe").is_err());
/// # Ok::<(), dlock_any::LockError>(())
/// ```
///
/// # Errors
/// [`LockError::Config`] for a value it does not know.
pub fn fallback_of(url: &str) -> Result<Fallback, LockError> {
    let mut fallback = Fallback::FailFast;
    backend::take_query(url, |k, v| match k {
        "fallback" => {
            fallback = v.parse().map_err(|e: LockError| e.to_string())?;
            Ok(true)
        }
        _ => Ok(false),
    })?;
    Ok(fallback)
}

/// The backend the URL names, without fallback.
async fn connect_backend(url: &str) -> Result<Arc<dyn Coordination>, LockError> {
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
        "redis" | "rediss" | "redis-sentinel" | "redis-cluster" => redis(url, false).await,
        "redlock" => redis(url, true).await,
        "etcd" => etcd(url).await,
        "zk" | "zookeeper" => zookeeper(url).await,
        other => Err(LockError::Config(format!(
            "{shown:?}: unknown scheme {other:?}; known: memory, sqlite, postgres, postgresql, mysql, mariadb, redis, rediss, redis-sentinel, redis-cluster, redlock, etcd, zk, zookeeper"
        ))),
    }
}

async fn sql(url: &str, feature: &str, enabled: bool) -> Result<Arc<dyn Coordination>, LockError> {
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

// each backend's constructor, or (its cargo feature off) the error naming the feature

async fn redis(url: &str, quorum: bool) -> Result<Arc<dyn Coordination>, LockError> {
    #[cfg(feature = "redis")]
    return Ok(if quorum {
        Arc::new(dlock_redis::Redlock::from_url(url).await?)
    } else {
        Arc::new(dlock_redis::RedisLock::from_url(url).await?)
    });
    #[cfg(not(feature = "redis"))]
    {
        let _ = quorum;
        Err(feature_off(url, "redis"))
    }
}

async fn etcd(url: &str) -> Result<Arc<dyn Coordination>, LockError> {
    #[cfg(feature = "etcd")]
    return Ok(Arc::new(dlock_etcd::EtcdLock::from_url(url).await?));
    #[cfg(not(feature = "etcd"))]
    Err(feature_off(url, "etcd"))
}

async fn zookeeper(url: &str) -> Result<Arc<dyn Coordination>, LockError> {
    #[cfg(feature = "zookeeper")]
    return Ok(Arc::new(dlock_zk::ZkLock::from_url(url).await?));
    #[cfg(not(feature = "zookeeper"))]
    Err(feature_off(url, "zookeeper"))
}

fn feature_off(url: &str, feature: &str) -> LockError {
    LockError::Config(format!(
        "{:?} needs the `{feature}` backend: enable dlock-any's cargo feature `{feature}`",
        redact_url(url)
    ))
}

/// The Rust examples of the README, the crates' READMEs and the `docs/` pages, compiled (and run, where
/// they have a `main`) as doctests, so the documentation cannot drift from the code.
/// They name every backend's types: compiled with the `full` feature (`scripts/test`
/// runs the doctests with `--all-features`).
#[cfg(all(doctest, feature = "full"))]
pub mod documentation {
    #[doc = include_str!("../../README.md")]
    pub struct Readme;
    #[doc = include_str!("../../docs/library.md")]
    pub struct Library;
    #[doc = include_str!("../../docs/safety.md")]
    pub struct Safety;
    #[doc = include_str!("../../docs/observability.md")]
    pub struct Observability;
    #[doc = include_str!("../../docs/adapters.md")]
    pub struct Adapters;
    #[doc = include_str!("../../docs/cli.md")]
    pub struct Cli;
    #[doc = include_str!("../../docs/interop.md")]
    pub struct Interop;
    #[doc = include_str!("../../dlock-core/README.md")]
    pub struct CoreReadme;
    #[doc = include_str!("../README.md")]
    pub struct AnyReadme;
    #[doc = include_str!("../../dlock-sql/README.md")]
    pub struct SqlReadme;
    #[doc = include_str!("../../dlock-redis/README.md")]
    pub struct RedisReadme;
    #[doc = include_str!("../../dlock-etcd/README.md")]
    pub struct EtcdReadme;
    #[doc = include_str!("../../dlock-zk/README.md")]
    pub struct ZkReadme;
    #[doc = include_str!("../../CONTRIBUTING.md")]
    pub struct Contributing;
}

#[cfg(test)]
mod tests {
    use super::*;

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
