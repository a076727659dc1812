//! Raw blocking locks for the hand-off and contended floors: the backend's push wake-up
//! with the fewest commands and no fairness (a woken client simply tries again), each
//! on its own connection, as dlock's clients in those scenarios are.

use std::time::Duration;

use dlock_any::async_trait;

/// One client of a raw blocking lock on one name.
#[async_trait]
pub trait FloorWaiter: Send + Sync {
    /// Blocks until this client holds the lock.
    async fn lock(&self) -> Result<(), String>;
    /// Releases it (and wakes the others).
    async fn unlock(&self) -> Result<(), String>;
}

/// The longest a waiter sleeps without a wake-up before trying again (a lost
/// notification only costs this).
#[cfg_attr(
    not(any(
        feature = "redis",
        feature = "postgres",
        feature = "etcd",
        feature = "zookeeper"
    )),
    allow(dead_code)
)]
const FALLBACK: Duration = Duration::from_secs(1);

/// A new client on lock `name`, if this backend wakes waiters by push.
pub async fn for_url(url: &str, name: &str) -> Option<Result<Box<dyn FloorWaiter>, String>> {
    let (scheme, plain) = crate::url_parts::scheme_and_base(url);
    match scheme.as_str() {
        #[cfg(feature = "redis")]
        "redis" => Some(redis_wait::connect(plain, name).await),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Some(pg_wait::connect(plain, name).await),
        #[cfg(feature = "etcd")]
        "etcd" => Some(etcd_wait::connect(plain, name).await),
        #[cfg(feature = "zookeeper")]
        "zk" | "zookeeper" => Some(zk_wait::connect(plain, name).await),
        _ => {
            // (read by the arms this build has)
            let _ = (plain, name);
            None
        }
    }
}

#[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
fn owner() -> String {
    format!(
        "{:016x}{:016x}",
        dlock_any::random_u64(),
        dlock_any::random_u64()
    )
}

#[cfg(feature = "redis")]
mod redis_wait {
    use super::*;
    use tokio::sync::{Mutex, mpsc};

    /// `SET NX PX` to take, compare-and-`DEL` + `PUBLISH` to release, and a RESP3
    /// subscription on the same connection to wake.
    pub struct RedisWaiter {
        conn: redis::aio::MultiplexedConnection,
        pushes: Mutex<mpsc::UnboundedReceiver<redis::PushInfo>>,
        release: redis::Script,
        key: String,
        channel: String,
        owner: String,
    }

    pub async fn connect(url: &str, name: &str) -> Result<Box<dyn FloorWaiter>, String> {
        let client =
            redis::Client::open(format!("{url}?protocol=resp3")).map_err(|e| e.to_string())?;
        let (tx, rx) = mpsc::unbounded_channel();
        let config = redis::AsyncConnectionConfig::new().set_push_sender(tx);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| e.to_string())?;
        let channel = format!("bench-floor-wait:{name}");
        conn.subscribe(&channel).await.map_err(|e| e.to_string())?;
        Ok(Box::new(RedisWaiter {
            conn,
            pushes: Mutex::new(rx),
            release: redis::Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) redis.call('PUBLISH', ARGV[2], '1') return 1 end return 0",
            ),
            key: format!("bench-floor-wait:{name}"),
            channel,
            owner: owner(),
        }))
    }

    #[async_trait]
    impl FloorWaiter for RedisWaiter {
        async fn lock(&self) -> Result<(), String> {
            let mut pushes = self.pushes.lock().await;
            loop {
                // drop wake-ups that came before this try
                while pushes.try_recv().is_ok() {}
                let mut c = self.conn.clone();
                let taken: Option<String> = redis::cmd("SET")
                    .arg(&self.key)
                    .arg(&self.owner)
                    .arg("NX")
                    .arg("PX")
                    .arg(10_000)
                    .query_async(&mut c)
                    .await
                    .map_err(|e| e.to_string())?;
                if taken.is_some() {
                    return Ok(());
                }
                let _ = tokio::time::timeout(FALLBACK, pushes.recv()).await;
            }
        }
        async fn unlock(&self) -> Result<(), String> {
            let mut c = self.conn.clone();
            let _: i64 = self
                .release
                .key(&self.key)
                .arg(&self.owner)
                .arg(&self.channel)
                .invoke_async(&mut c)
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
    }
}

#[cfg(feature = "postgres")]
mod pg_wait {
    use super::*;
    use sqlx::postgres::{PgListener, PgPool};
    use tokio::sync::Mutex;

    /// The floor's two statements on one connection, and `LISTEN` to wake.
    pub struct PgWaiter {
        pool: PgPool,
        listener: Mutex<PgListener>,
        name: String,
        owner: String,
    }

    pub async fn connect(url: &str, name: &str) -> Result<Box<dyn FloorWaiter>, String> {
        let pool = crate::floor::postgres_pool(url, 1).await?;
        let mut listener = PgListener::connect(url).await.map_err(|e| e.to_string())?;
        listener
            .listen("bench_floor_wait")
            .await
            .map_err(|e| e.to_string())?;
        Ok(Box::new(PgWaiter {
            pool,
            listener: Mutex::new(listener),
            name: format!("bench-floor-wait-{name}"),
            owner: owner(),
        }))
    }

    #[async_trait]
    impl FloorWaiter for PgWaiter {
        async fn lock(&self) -> Result<(), String> {
            let mut listener = self.listener.lock().await;
            loop {
                let taken: Option<(i64,)> = sqlx::query_as(
                    "INSERT INTO dlock_floor AS d (name, owner, token, expires_at) VALUES ($1, $2, 1, clock_timestamp() + interval '10 seconds') \
                     ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = d.token + 1, expires_at = EXCLUDED.expires_at \
                     WHERE d.expires_at <= clock_timestamp() RETURNING token",
                )
                .bind(&self.name)
                .bind(&self.owner)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| e.to_string())?;
                if taken.is_some() {
                    return Ok(());
                }
                let _ = tokio::time::timeout(FALLBACK, listener.recv()).await;
            }
        }
        async fn unlock(&self) -> Result<(), String> {
            sqlx::query(
                "WITH r AS (UPDATE dlock_floor SET owner = '', expires_at = clock_timestamp() WHERE name = $1 AND owner = $2 RETURNING name) \
                 SELECT pg_notify('bench_floor_wait', name) FROM r",
            )
            .bind(&self.name)
            .bind(&self.owner)
            .execute(&self.pool)
            .await
            .map_err(|e| e.to_string())?;
            Ok(())
        }
    }
}

#[cfg(feature = "etcd")]
mod etcd_wait {
    use super::*;
    use etcd_client::{Client, EventType, WatchOptions};

    /// One key: created if absent with a pre-granted lease; otherwise watch it (from
    /// the revision just read, so no delete is missed) and try again when it goes.
    pub struct EtcdWaiter {
        client: Client,
        lease: i64,
        key: String,
    }

    pub async fn connect(url: &str, name: &str) -> Result<Box<dyn FloorWaiter>, String> {
        let (client, lease) = crate::floor::etcd_floor::client_with_lease(url).await?;
        Ok(Box::new(EtcdWaiter {
            client,
            lease,
            key: format!("bench-floor-wait/{name}"),
        }))
    }

    #[async_trait]
    impl FloorWaiter for EtcdWaiter {
        async fn lock(&self) -> Result<(), String> {
            let mut c = self.client.clone();
            loop {
                let take = crate::floor::etcd_floor::create_if_absent(&self.key, self.lease);
                let r = c.txn(take).await.map_err(|e| e.to_string())?;
                if r.succeeded() {
                    return Ok(());
                }
                let next = r.header().map_or(0, |h| h.revision()) + 1;
                let mut watch = c
                    .watch(
                        self.key.clone(),
                        Some(WatchOptions::new().with_start_revision(next)),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                let deleted = async {
                    while let Ok(Some(m)) = watch.message().await {
                        if m.events()
                            .iter()
                            .any(|e| e.event_type() == EventType::Delete)
                        {
                            return;
                        }
                    }
                };
                let _ = tokio::time::timeout(FALLBACK, deleted).await;
            }
        }
        async fn unlock(&self) -> Result<(), String> {
            let mut c = self.client.clone();
            c.delete(self.key.clone(), None)
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
    }
}

#[cfg(feature = "zookeeper")]
mod zk_wait {
    use super::*;
    use zookeeper_client as zk;

    /// One ephemeral node: created to take; otherwise watch it and try again when it
    /// goes.
    pub struct ZkWaiter {
        client: zk::Client,
        path: String,
    }

    pub async fn connect(url: &str, name: &str) -> Result<Box<dyn FloorWaiter>, String> {
        Ok(Box::new(ZkWaiter {
            client: crate::floor::zk_floor::session(url).await?,
            path: format!("/bench-floor-wait-{name}"),
        }))
    }

    #[async_trait]
    impl FloorWaiter for ZkWaiter {
        async fn lock(&self) -> Result<(), String> {
            let mode = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
            loop {
                match self.client.create(&self.path, b"", &mode).await {
                    Ok(_) => return Ok(()),
                    Err(zk::Error::NodeExists) => {}
                    Err(e) => return Err(e.to_string()),
                }
                let (stat, watcher) = self
                    .client
                    .check_and_watch_stat(&self.path)
                    .await
                    .map_err(|e| e.to_string())?;
                if stat.is_some() {
                    let _ = tokio::time::timeout(FALLBACK, watcher.changed()).await;
                }
            }
        }
        async fn unlock(&self) -> Result<(), String> {
            self.client
                .delete(&self.path, None)
                .await
                .map_err(|e| e.to_string())
        }
    }
}
