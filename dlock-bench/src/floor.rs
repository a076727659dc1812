//! Raw-protocol floors: the same acquire + release job with the fewest server commands,
//! on the same client crates the adapters use. Our figure divided by the floor's, in
//! the same run, is what the adapter's own work costs.

use std::time::Duration;

use dlock_any::async_trait;

/// One acquire + release cycle on a free lock, done the cheapest way.
#[async_trait]
pub trait Floor: Send + Sync {
    /// What the floor does, for the report.
    fn describe(&self) -> &'static str;
    /// One cycle.
    async fn cycle(&self) -> Result<(), String>;
    /// The same floor on its own lock name, sharing this one's connections (for the
    /// parallel scenario, as dlock's tasks share one client).
    async fn fork(&self) -> Result<Box<dyn Floor>, String>;
}

fn owner() -> String {
    format!(
        "{:016x}{:016x}",
        dlock_any::random_u64(),
        dlock_any::random_u64()
    )
}

fn key() -> String {
    format!("bench-floor-{:016x}", dlock_any::random_u64())
}

/// The URL's scheme (lower case) and the URL without its query (dlock's own options).
pub fn scheme_and_base(url: &str) -> (String, &str) {
    let scheme = url
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    (scheme, url.split('?').next().unwrap_or(url))
}

/// A floor for the URL's backend, if there is one for it in this build.
pub async fn for_url(url: &str) -> Option<Result<Box<dyn Floor>, String>> {
    let (scheme, plain) = scheme_and_base(url);
    match scheme.as_str() {
        #[cfg(feature = "redis")]
        "redis" => Some(redis_floor::connect(plain).await),
        #[cfg(feature = "redis")]
        "redlock" => Some(redis_floor::redlock(plain).await),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Some(sql_floor::postgres(plain).await),
        #[cfg(feature = "mysql")]
        "mysql" | "mariadb" => {
            Some(sql_floor::mysql(&plain.replacen("mariadb:", "mysql:", 1)).await)
        }
        #[cfg(feature = "sqlite")]
        "sqlite" => Some(sql_floor::sqlite(plain).await),
        #[cfg(feature = "etcd")]
        "etcd" => Some(etcd_floor::connect(plain).await),
        #[cfg(feature = "zookeeper")]
        "zk" | "zookeeper" => Some(zk_floor::connect(plain).await),
        _ => None,
    }
}

#[cfg(feature = "redis")]
mod redis_floor {
    use super::*;

    /// `SET NX PX` + `INCR` of the fence in one EVALSHA; compare-and-delete + `PUBLISH`
    /// in another.
    #[derive(Clone)]
    pub struct RedisFloor {
        conn: redis::aio::MultiplexedConnection,
        acquire: redis::Script,
        release: redis::Script,
        key: String,
        fence: String,
        owner: String,
    }

    pub async fn connect(url: &str) -> Result<Box<dyn Floor>, String> {
        Ok(Box::new(node(url).await?))
    }

    async fn node(url: &str) -> Result<RedisFloor, String> {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        let k = key();
        Ok(RedisFloor {
            conn,
            acquire: redis::Script::new(
                "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0",
            ),
            release: redis::Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) redis.call('PUBLISH', ARGV[2], '1') return 1 end return 0",
            ),
            key: format!("{{{k}}}:lock"),
            fence: format!("{{{k}}}:fence"),
            owner: owner(),
        })
    }

    impl RedisFloor {
        fn renamed(&self) -> Self {
            let k = key();
            Self {
                key: format!("{{{k}}}:lock"),
                fence: format!("{{{k}}}:fence"),
                owner: owner(),
                ..self.clone()
            }
        }

        async fn take(&self) -> Result<bool, String> {
            let mut c = self.conn.clone();
            let t: i64 = self
                .acquire
                .key(&self.key)
                .key(&self.fence)
                .arg(&self.owner)
                .arg(10_000)
                .invoke_async(&mut c)
                .await
                .map_err(|e| e.to_string())?;
            Ok(t != 0)
        }

        async fn give_back(&self) -> Result<(), String> {
            let mut c = self.conn.clone();
            let _: i64 = self
                .release
                .key(&self.key)
                .arg(&self.owner)
                .arg("bench-floor")
                .invoke_async(&mut c)
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
    }

    /// Redlock's floor: the single-node floor's two scripts, sent to every node in
    /// parallel, a quorum required (one round each way; no fencing-counter round).
    pub struct RedlockFloor {
        nodes: Vec<RedisFloor>,
    }

    pub async fn redlock(url: &str) -> Result<Box<dyn Floor>, String> {
        let hosts = url.split_once("://").map_or(url, |(_, h)| h);
        let hosts = hosts.split(['/', '?']).next().unwrap_or(hosts);
        let mut nodes = Vec::new();
        for h in hosts.split(',') {
            nodes.push(node(&format!("redis://{h}")).await?);
        }
        RedlockFloor::on_one_name(nodes)
    }

    impl RedlockFloor {
        /// One lock name and owner across the nodes (the first node's), as Redlock uses.
        fn on_one_name(mut nodes: Vec<RedisFloor>) -> Result<Box<dyn Floor>, String> {
            let first = nodes.first().ok_or("no Redlock node")?.clone();
            for n in &mut nodes {
                n.key.clone_from(&first.key);
                n.fence.clone_from(&first.fence);
                n.owner.clone_from(&first.owner);
            }
            Ok(Box::new(Self { nodes }))
        }
    }

    #[async_trait]
    impl Floor for RedlockFloor {
        fn describe(&self) -> &'static str {
            "on every node in parallel: 1 EVALSHA (SET NX PX + INCR), then 1 EVALSHA (compare, DEL, PUBLISH); quorum"
        }
        async fn cycle(&self) -> Result<(), String> {
            let mut set = tokio::task::JoinSet::new();
            for n in &self.nodes {
                let n = n.clone();
                set.spawn(async move { n.take().await });
            }
            let taken = set
                .join_all()
                .await
                .into_iter()
                .filter(|r| matches!(r, Ok(true)))
                .count();
            if taken <= self.nodes.len() / 2 {
                return Err("floor lock busy".into());
            }
            let mut set = tokio::task::JoinSet::new();
            for n in &self.nodes {
                let n = n.clone();
                set.spawn(async move { n.give_back().await });
            }
            set.join_all()
                .await
                .into_iter()
                .collect::<Result<Vec<()>, String>>()?;
            Ok(())
        }
        async fn fork(&self) -> Result<Box<dyn Floor>, String> {
            Self::on_one_name(self.nodes.iter().map(RedisFloor::renamed).collect())
        }
    }

    #[async_trait]
    impl Floor for RedisFloor {
        fn describe(&self) -> &'static str {
            "1 EVALSHA (SET NX PX + INCR) + 1 EVALSHA (compare, DEL, PUBLISH)"
        }
        async fn cycle(&self) -> Result<(), String> {
            if !self.take().await? {
                return Err("floor lock busy".into());
            }
            self.give_back().await
        }
        async fn fork(&self) -> Result<Box<dyn Floor>, String> {
            Ok(Box::new(self.renamed()))
        }
    }
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod sql_floor {
    use super::*;
    use sqlx::AssertSqlSafe;

    /// The two statements, on a pool the size of the adapter's (8; SQLite 4): sqlx hands
    /// a used connection back asynchronously, so a one-connection pool would make the
    /// floor wait for that.
    pub struct SqlFloor<DB: sqlx::Database> {
        pool: sqlx::Pool<DB>,
        take: &'static str,
        release: &'static str,
        name: String,
        owner: String,
    }

    #[cfg(feature = "postgres")]
    pub async fn postgres(url: &str) -> Result<Box<dyn Floor>, String> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .connect(url)
            .await
            .map_err(|e| e.to_string())?;
        sqlx::query("CREATE TABLE IF NOT EXISTS dlock_floor (name TEXT PRIMARY KEY, owner TEXT NOT NULL, token BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)")
            .execute(&pool).await.map_err(|e| e.to_string())?;
        Ok(Box::new(SqlFloor {
            pool,
            take: "INSERT INTO dlock_floor AS d (name, owner, token, expires_at) VALUES ($1, $2, 1, clock_timestamp() + interval '10 seconds') \
                   ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = d.token + 1, expires_at = EXCLUDED.expires_at \
                   WHERE d.expires_at <= clock_timestamp() RETURNING token",
            release: "WITH r AS (UPDATE dlock_floor SET owner = '', expires_at = clock_timestamp() WHERE name = $1 AND owner = $2 RETURNING name) \
                      SELECT pg_notify('bench_floor', name) FROM r",
            name: key(),
            owner: owner(),
        }))
    }

    #[cfg(feature = "mysql")]
    pub async fn mysql(url: &str) -> Result<Box<dyn Floor>, String> {
        let pool = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(8)
            .connect(url)
            .await
            .map_err(|e| e.to_string())?;
        sqlx::query("CREATE TABLE IF NOT EXISTS dlock_floor (name VARBINARY(256) NOT NULL PRIMARY KEY, owner VARCHAR(64) NOT NULL, token BIGINT NOT NULL, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB")
            .execute(&pool).await.map_err(|e| e.to_string())?;
        Ok(Box::new(SqlFloor {
            pool,
            take: "INSERT INTO dlock_floor (name, owner, token, expires_at) VALUES (?, ?, LAST_INSERT_ID(1), UTC_TIMESTAMP(6) + INTERVAL 10 SECOND) \
                   ON DUPLICATE KEY UPDATE owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner), \
                   token = IF(expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(token + 1), token + LAST_INSERT_ID(0)), \
                   expires_at = IF(expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 10 SECOND, expires_at)",
            release: "UPDATE dlock_floor SET owner = '', expires_at = UTC_TIMESTAMP(6) WHERE name = ? AND owner = ?",
            name: key(),
            owner: owner(),
        }))
    }

    #[cfg(feature = "sqlite")]
    pub async fn sqlite(url: &str) -> Result<Box<dyn Floor>, String> {
        use std::str::FromStr;
        let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url)
            .map_err(|e| e.to_string())?
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(opts)
            .await
            .map_err(|e| e.to_string())?;
        sqlx::query("CREATE TABLE IF NOT EXISTS dlock_floor (name TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL, expires_at INTEGER NOT NULL) STRICT")
            .execute(&pool).await.map_err(|e| e.to_string())?;
        Ok(Box::new(SqlFloor {
            pool,
            take: "INSERT INTO dlock_floor (name, owner, token, expires_at) VALUES (?1, ?2, 1, CAST(unixepoch('subsec') * 1000 AS INTEGER) + 10000) \
                   ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token = dlock_floor.token + 1, expires_at = excluded.expires_at \
                   WHERE dlock_floor.expires_at <= CAST(unixepoch('subsec') * 1000 AS INTEGER) RETURNING token",
            release: "UPDATE dlock_floor SET owner = '', expires_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE name = ?1 AND owner = ?2",
            name: key(),
            owner: owner(),
        }))
    }

    #[async_trait]
    impl<DB> Floor for SqlFloor<DB>
    where
        DB: sqlx::Database,
        for<'q> <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
        for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
        for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
        for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    {
        fn describe(&self) -> &'static str {
            "1 upsert statement + 1 update statement"
        }
        async fn cycle(&self) -> Result<(), String> {
            sqlx::query(AssertSqlSafe(self.take))
                .bind(self.name.clone())
                .bind(self.owner.clone())
                .execute(&self.pool)
                .await
                .map_err(|e| e.to_string())?;
            sqlx::query(AssertSqlSafe(self.release))
                .bind(self.name.clone())
                .bind(self.owner.clone())
                .execute(&self.pool)
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
        async fn fork(&self) -> Result<Box<dyn Floor>, String> {
            Ok(Box::new(Self {
                pool: self.pool.clone(),
                take: self.take,
                release: self.release,
                name: key(),
                owner: owner(),
            }))
        }
    }
}

#[cfg(feature = "etcd")]
pub(crate) mod etcd_floor {
    use super::*;
    use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

    /// With a lease granted once up front: one txn to create the key, one delete.
    pub struct EtcdFloor {
        client: Client,
        lease: i64,
        key: String,
    }

    /// A client for the `etcd://` URL's members and a 60 s lease granted up front.
    pub async fn client_with_lease(url: &str) -> Result<(Client, i64), String> {
        let hosts = url
            .split_once("://")
            .map_or(url, |(_, h)| h)
            .trim_end_matches('/');
        let endpoints: Vec<String> = hosts.split(',').map(|h| format!("http://{h}")).collect();
        let mut client = Client::connect(&endpoints, None)
            .await
            .map_err(|e| e.to_string())?;
        let lease = client
            .lease_grant(60, None)
            .await
            .map_err(|e| e.to_string())?
            .id();
        Ok((client, lease))
    }

    /// Creates `key` on `lease` only if it does not exist: the raw way to take a lock.
    pub fn create_if_absent(key: &str, lease: i64) -> Txn {
        Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                "",
                Some(PutOptions::new().with_lease(lease)),
            )])
    }

    pub async fn connect(url: &str) -> Result<Box<dyn Floor>, String> {
        let (client, lease) = client_with_lease(url).await?;
        Ok(Box::new(EtcdFloor {
            client,
            lease,
            key: format!("bench-floor/{}", key()),
        }))
    }

    #[async_trait]
    impl Floor for EtcdFloor {
        fn describe(&self) -> &'static str {
            "1 txn (create with a pre-granted lease) + 1 delete"
        }
        async fn cycle(&self) -> Result<(), String> {
            let mut c = self.client.clone();
            let r = c
                .txn(create_if_absent(&self.key, self.lease))
                .await
                .map_err(|e| e.to_string())?;
            if !r.succeeded() {
                return Err("floor key exists".into());
            }
            c.delete(self.key.clone(), None)
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
        async fn fork(&self) -> Result<Box<dyn Floor>, String> {
            Ok(Box::new(EtcdFloor {
                client: self.client.clone(),
                lease: self.lease,
                key: format!("bench-floor/{}", key()),
            }))
        }
    }
}

#[cfg(feature = "zookeeper")]
pub(crate) mod zk_floor {
    use super::*;
    use zookeeper_client as zk;

    /// Create an ephemeral-sequential node and list its parent in one round trip, then
    /// delete the node.
    pub struct ZkFloor {
        client: zk::Client,
        dir: String,
    }

    /// A session on the `zk://` URL's servers (its chroot, if any, is not used).
    pub async fn session(url: &str) -> Result<zk::Client, String> {
        let hosts = url.split_once("://").map_or(url, |(_, h)| h);
        let hosts = hosts.split('/').next().unwrap_or(hosts);
        zk::Client::connect(hosts).await.map_err(|e| e.to_string())
    }

    pub async fn connect(url: &str) -> Result<Box<dyn Floor>, String> {
        Ok(Box::new(ZkFloor::new(session(url).await?).await?))
    }

    impl ZkFloor {
        async fn new(client: zk::Client) -> Result<Self, String> {
            let dir = format!("/bench-floor-{}", key());
            client
                .mkdir(
                    &dir,
                    &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok(Self { client, dir })
        }
    }

    #[async_trait]
    impl Floor for ZkFloor {
        fn describe(&self) -> &'static str {
            "create ephemeral-sequential + list children (one round trip) + delete"
        }
        async fn cycle(&self) -> Result<(), String> {
            let prefix = format!("{}/lock-", self.dir);
            let create = self.client.create(
                &prefix,
                b"",
                &zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all()),
            );
            let list = self.client.list_children(&self.dir);
            let (created, listed) = tokio::join!(create, list);
            let (_, seq) = created.map_err(|e| e.to_string())?;
            listed.map_err(|e| e.to_string())?;
            self.client
                .delete(&format!("{prefix}{seq}"), None)
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
        async fn fork(&self) -> Result<Box<dyn Floor>, String> {
            Ok(Box::new(ZkFloor::new(self.client.clone()).await?))
        }
    }
}
