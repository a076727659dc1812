//! The backend's own store, written through dlock's fence helpers instead of the
//! runner's [`crate::FencedStore`]: a fenced SQL transaction (PostgreSQL, MySQL/MariaDB,
//! SQLite), the fenced read and write scripts (Redis), a transaction guarded by the
//! lease's key (etcd), a multi guarded by the holder's node (ZooKeeper).
//!
//! Two workloads use it: a counter whose value is the history of the tokens that wrote
//! it ([`counter`]), so the checker reads the store's own record of the writes it
//! accepted; and exactly-once effects behind [`dlock_any::Idempotent`] ([`effects`]).

/// Runs `$body` in a transaction on `$pool` that first raises `$resource`'s fence to
/// `$token` with `$fence` — unless `$fenced` is off (the control runs).
macro_rules! in_fenced_tx {
    ($pool:expr, $fence:path, $fenced:expr, $resource:expr, $token:expr, |$tx:ident| $body:expr) => {{
        let mut $tx = $pool
            .begin()
            .await
            .map_err($crate::own_store::db("begin"))?;
        if $fenced {
            $fence(&mut $tx, $crate::own_store::LOCK_TABLE, &$resource, $token).await?;
        }
        let out = $body;
        $tx.commit()
            .await
            .map_err($crate::own_store::db("commit"))?;
        out
    }};
}

/// Expands `$body` once for each SQL database the store can be — with `$pool` its pool,
/// `$fence` its fence helper and `$dialect` the [`Dialect`] that picks its statement
/// text — followed by the match arms given for the other stores.
macro_rules! on_sql {
    ($store:expr, |$pool:ident, $fence:ident, $dialect:ident| $body:expr, $($others:tt)*) => {
        match $store {
            $crate::own_store::OwnStore::Postgres(_, $pool) => {
                let ($fence, $dialect) = (
                    dlock_sql::fence::fence_postgres,
                    $crate::own_store::Dialect::Postgres,
                );
                $body
            }
            $crate::own_store::OwnStore::MySql(_, $pool) => {
                let ($fence, $dialect) = (
                    dlock_sql::fence::fence_mysql,
                    $crate::own_store::Dialect::MySql,
                );
                $body
            }
            $crate::own_store::OwnStore::Sqlite(_, $pool) => {
                let ($fence, $dialect) = (
                    dlock_sql::fence::fence_sqlite,
                    $crate::own_store::Dialect::Sqlite,
                );
                $body
            }
            $($others)*
        }
    };
}

pub mod counter;
pub mod effects;

use std::sync::Arc;

use dlock_any::{DistributedLock, LockError, ResultStore};
use dlock_etcd::EtcdLock;
use dlock_etcd::etcd_client;
use dlock_redis::RedisLock;
use dlock_sql::SqlLock;
use dlock_zk::ZkLock;
use dlock_zk::zookeeper_client as zk;

/// The lock table whose fence table the SQL helpers raise.
const LOCK_TABLE: &str = dlock_sql::DEFAULT_TABLE;

/// A backend's lock and a client of the store it lives in.
// one per process, made once: the etcd variant's size costs nothing
#[allow(clippy::large_enum_variant)]
pub enum OwnStore {
    /// PostgreSQL.
    Postgres(SqlLock, sqlx::PgPool),
    /// MySQL or MariaDB.
    MySql(SqlLock, sqlx::MySqlPool),
    /// SQLite.
    Sqlite(SqlLock, sqlx::SqlitePool),
    /// A single Redis server (and a plain connection, for the checker's final read).
    Redis(RedisLock, redis::aio::MultiplexedConnection),
    /// etcd.
    Etcd(EtcdLock, etcd_client::Client),
    /// ZooKeeper.
    ZooKeeper(ZkLock, ZkClient),
}

/// A ZooKeeper client that starts a new session when its own has ended (a paused
/// process wakes up to an expired session, and a client never leaves that state).
pub struct ZkClient {
    hosts: String,
    client: tokio::sync::Mutex<zk::Client>,
}

/// The store client's session timeout: as an application's own client would have, far
/// longer than the lock's TTL and the holder pauses, so a pause ends the lock's session
/// and leaves the store's alive. (At the client's default 6 s, its connection times out
/// after 2.4 s without an answer, and a holder woken from a 2.5 s pause saw its write
/// fail on that timer: the unfenced control then did no harm, by luck.)
const STORE_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl ZkClient {
    async fn connect(hosts: &str) -> Result<zk::Client, LockError> {
        zk::Client::connector()
            .with_session_timeout(STORE_SESSION_TIMEOUT)
            .connect(hosts)
            .await
            .map_err(|e| LockError::backend("connect", e))
    }

    /// The client, on a live session.
    ///
    /// # Errors
    /// The ensemble unreachable.
    pub async fn get(&self) -> Result<zk::Client, LockError> {
        let mut client = self.client.lock().await;
        if client.state().is_terminated() {
            *client = Self::connect(&self.hosts).await?;
        }
        Ok(client.clone())
    }

    /// A client on a new session, whatever the old one's state.
    ///
    /// # Errors
    /// The ensemble unreachable.
    pub async fn reconnect(&self) -> Result<zk::Client, LockError> {
        let mut client = self.client.lock().await;
        *client = Self::connect(&self.hosts).await?;
        Ok(client.clone())
    }
}

/// Which SQL database a statement is written for.
#[derive(Clone, Copy)]
enum Dialect {
    Postgres,
    MySql,
    Sqlite,
}

impl Dialect {
    /// `postgres` on PostgreSQL (numbered placeholders), `others` elsewhere (`?`).
    fn sql(self, postgres: &'static str, others: &'static str) -> &'static str {
        self.pick(postgres, others, others)
    }

    /// The text written for this database.
    fn pick(
        self,
        postgres: &'static str,
        mysql: &'static str,
        sqlite: &'static str,
    ) -> &'static str {
        match self {
            Self::Postgres => postgres,
            Self::MySql => mysql,
            Self::Sqlite => sqlite,
        }
    }
}

/// The run's part of a lock name (its last segment): counters and requests are keyed by
/// it.
fn run_of(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

fn db(what: &str) -> impl Fn(sqlx::Error) -> LockError + '_ {
    move |e| LockError::backend(what.to_owned(), e)
}

/// The `host:port,…` list of a URL: between the scheme and the path or query.
fn hosts(url: &str) -> Vec<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    rest[..end].split(',').map(str::to_owned).collect()
}

impl OwnStore {
    /// Whether `url`'s backend has fence helpers (every backend but Redlock, whose
    /// tokens no single server's store can check).
    #[must_use]
    pub fn supports(url: &str) -> bool {
        [
            "postgres", "mysql", "mariadb", "sqlite", "redis:", "rediss:", "etcd", "zk",
        ]
        .iter()
        .any(|s| url.starts_with(s))
    }

    /// Whether `url`'s backend keeps idempotency results ([`ResultStore`]): the SQL
    /// databases and Redis.
    #[must_use]
    pub fn keeps_results(url: &str) -> bool {
        Self::supports(url) && !url.starts_with("etcd") && !url.starts_with("zk")
    }

    /// Connects the lock and the store client `url` names.
    ///
    /// # Errors
    /// A backend without fence helpers; the server unreachable.
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        let sql_url = |u: &str| u.split('?').next().unwrap_or(u).to_owned();
        if url.starts_with("postgres") {
            let lock = SqlLock::connect(url).await?;
            let pool = sqlx::PgPool::connect(&sql_url(url))
                .await
                .map_err(db("connect"))?;
            Ok(Self::Postgres(lock, pool))
        } else if url.starts_with("mysql") || url.starts_with("mariadb") {
            let lock = SqlLock::connect(url).await?;
            let u = sql_url(url).replacen("mariadb://", "mysql://", 1);
            let pool = sqlx::MySqlPool::connect(&u).await.map_err(db("connect"))?;
            Ok(Self::MySql(lock, pool))
        } else if url.starts_with("sqlite") {
            let lock = SqlLock::connect(url).await?;
            let pool = sqlx::SqlitePool::connect(&sql_url(url))
                .await
                .map_err(db("connect"))?;
            Ok(Self::Sqlite(lock, pool))
        } else if url.starts_with("redis:") {
            let lock = RedisLock::connect(url).await?;
            let plain = redis::Client::open(url.split('?').next().unwrap_or(url))
                .map_err(|e| LockError::backend("connect", e))?
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| LockError::backend("connect", e))?;
            Ok(Self::Redis(lock, plain))
        } else if url.starts_with("etcd") {
            let lock = EtcdLock::from_url(url).await?;
            let client = etcd_client::Client::connect(hosts(url), None)
                .await
                .map_err(|e| LockError::backend("connect", e))?;
            Ok(Self::Etcd(lock, client))
        } else if url.starts_with("zk") {
            let lock = ZkLock::from_url(url).await?;
            let hosts = hosts(url).join(",");
            let client = ZkClient::connect(&hosts).await?;
            Ok(Self::ZooKeeper(
                lock,
                ZkClient {
                    hosts,
                    client: tokio::sync::Mutex::new(client),
                },
            ))
        } else {
            Err(LockError::Config(format!("{url}: no fence helpers here")))
        }
    }

    /// The lock, as the workers take it.
    #[must_use]
    pub fn lock(&self) -> Arc<dyn DistributedLock> {
        match self {
            Self::Postgres(l, _) | Self::MySql(l, _) | Self::Sqlite(l, _) => Arc::new(l.clone()),
            Self::Redis(l, _) => Arc::new(l.clone()),
            Self::Etcd(l, _) => Arc::new(l.clone()),
            Self::ZooKeeper(l, _) => Arc::new(l.clone()),
        }
    }

    /// The idempotency records next to the lock, where there are any.
    #[must_use]
    pub fn results(&self) -> Option<Arc<dyn ResultStore>> {
        match self {
            Self::Postgres(l, _) | Self::MySql(l, _) | Self::Sqlite(l, _) => {
                Some(Arc::new(l.results()))
            }
            Self::Redis(l, _) => Some(Arc::new(l.results())),
            Self::Etcd(..) | Self::ZooKeeper(..) => None,
        }
    }
}
