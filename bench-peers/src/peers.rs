//! Peer lock clients behind the `DistributedLock` trait, just enough for the
//! uncontended, hand-off and contended scenarios (acquire with a wait, release).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use dlock_any::{
    Acquisition, Capabilities, DistributedLock, FencingToken, Lease, LockError, LockInfo, LockName,
    OwnerId,
};
use tokio::time::Instant;

fn backend(e: impl std::fmt::Display) -> LockError {
    LockError::Backend {
        message: e.to_string(),
        source: None,
    }
}

fn unsupported(what: &str) -> LockError {
    LockError::InvalidArgument(format!("{what} is not part of this peer's API"))
}

/// Keeps the peer's own handle for a held lock inside the lease until release.
fn lease_with<T: Send + 'static>(
    name: &LockName,
    ttl: Duration,
    sent: Instant,
    handle: T,
) -> Result<Lease, LockError> {
    Ok(Lease::new(
        name.clone(),
        OwnerId::random()?,
        FencingToken::new(0),
        ttl,
        sent,
    )
    .with_backend_data(Arc::new(Mutex::new(Some(handle)))))
}

fn take<T: Send + 'static>(lease: &Lease) -> Option<T> {
    lease
        .backend_data::<Mutex<Option<T>>>()
        .and_then(|m| m.lock().unwrap_or_else(PoisonError::into_inner).take())
}

async fn within<T>(
    name: &LockName,
    wait: Duration,
    f: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    match tokio::time::timeout(wait, f).await {
        Ok(r) => r,
        Err(_) => Err(LockError::Timeout {
            name: name.to_string(),
            waited: wait,
        }),
    }
}

/// What a peer offers: a blocking acquire and a release.
#[async_trait]
pub trait Peer: Send + Sync {
    /// Waits for the lock; returns the lease carrying the peer's handle.
    async fn acquire(&self, name: &LockName, ttl: Duration) -> Result<Lease, LockError>;
    /// Releases; `false` if the lease carried no handle.
    async fn release(&self, lease: &Lease) -> Result<bool, LockError>;
    /// For the report.
    fn label(&self) -> &'static str;
}

/// A peer behind the trait: `acquire` bounded by `wait`, no renew or inspect.
pub struct AsLock<P>(pub P);

#[async_trait]
impl<P: Peer> DistributedLock for AsLock<P> {
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        let (name, ttl) = (request.name(), request.ttl());
        match request.wait() {
            // a peer only waits: a try is a wait of a millisecond
            None => match within(name, Duration::from_millis(1), self.0.acquire(name, ttl)).await {
                Ok(l) => Ok(Some(l)),
                Err(LockError::Timeout { .. }) => Ok(None),
                Err(e) => Err(e),
            },
            Some(wait) => within(name, wait, self.0.acquire(name, ttl))
                .await
                .map(Some),
        }
    }
    async fn renew(&self, _lease: &Lease) -> Result<Lease, LockError> {
        Err(unsupported("renew"))
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.0.release(lease).await
    }
    async fn inspect(&self, _name: &LockName) -> Result<Option<LockInfo>, LockError> {
        Err(unsupported("inspect"))
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::per_lease()
    }
    fn backend_name(&self) -> &'static str {
        self.0.label()
    }
}

/// rslock 0.10: Redlock over one or more Redis servers; waiting is its retry loop
/// (3 tries with a random 0–200 ms sleep per `lock`, looped by `acquire_no_guard`).
pub struct Rslock(pub rslock::LockManager);

#[async_trait]
impl Peer for Rslock {
    async fn acquire(&self, name: &LockName, ttl: Duration) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let lock = self
            .0
            .acquire_no_guard(name.as_str().as_bytes(), ttl)
            .await
            .map_err(backend)?;
        lease_with(name, ttl, sent, lock)
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(lock) = take::<rslock::Lock>(lease) else {
            return Ok(false);
        };
        self.0.unlock(&lock).await;
        Ok(true)
    }
    fn label(&self) -> &'static str {
        "rslock"
    }
}

/// etcd-client's `lock`/`unlock` (etcd's v3lock service: the server waits on the
/// predecessor) with one lease granted up front and kept alive.
pub struct EtcdV3Lock {
    client: etcd_client::Client,
    lease: i64,
}

impl EtcdV3Lock {
    /// Connects and grants the lease the locks hang on.
    ///
    /// # Errors
    /// The client's.
    pub async fn connect(endpoints: &[String]) -> Result<Self, LockError> {
        let mut client = etcd_client::Client::connect(endpoints, None)
            .await
            .map_err(backend)?;
        let lease = client.lease_grant(30, None).await.map_err(backend)?.id();
        let (mut keeper, mut stream) = client.lease_keep_alive(lease).await.map_err(backend)?;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                if keeper.keep_alive().await.is_err() || stream.message().await.is_err() {
                    return;
                }
            }
        });
        Ok(Self { client, lease })
    }
}

#[async_trait]
impl Peer for EtcdV3Lock {
    async fn acquire(&self, name: &LockName, ttl: Duration) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let mut c = self.client.clone();
        let opts = etcd_client::LockOptions::new().with_lease(self.lease);
        let resp = c.lock(name.as_str(), Some(opts)).await.map_err(backend)?;
        lease_with(name, ttl, sent, resp.key().to_vec())
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(key) = take::<Vec<u8>>(lease) else {
            return Ok(false);
        };
        self.client.clone().unlock(key).await.map_err(backend)?;
        Ok(true)
    }
    fn label(&self) -> &'static str {
        "etcd-client lock"
    }
}

/// zookeeper-client 0.11's own lock recipe (Curator-compatible); released by dropping
/// the lock client, which deletes the node in the background, as the crate documents.
pub struct ZkRecipe(pub zookeeper_client::Client);

#[async_trait]
impl Peer for ZkRecipe {
    async fn acquire(&self, name: &LockName, ttl: Duration) -> Result<Lease, LockError> {
        use zookeeper_client as zk;
        let sent = Instant::now();
        let dir = format!("/bench-peers/{}", name.as_str().replace(['/', '.'], "_"));
        let prefix = zk::LockPrefix::new_curator(&dir, "lock-").map_err(backend)?;
        let options = zk::LockOptions::new(zk::Acls::anyone_all())
            .with_ancestor_options(zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))
            .map_err(backend)?;
        let lock = self.0.lock(prefix, b"", options).await.map_err(backend)?;
        lease_with(name, ttl, sent, lock.into_owned())
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        Ok(take::<zookeeper_client::OwnedLockClient>(lease).is_some())
    }
    fn label(&self) -> &'static str {
        "zookeeper-client recipe"
    }
}

/// sqlx 0.9's `PgAdvisoryLock` on a pooled connection held for the lock's life (no TTL,
/// no fencing token: it is only here for speed).
pub struct PgAdvisory {
    pool: sqlx::PgPool,
}

type AdvisoryGuard =
    sqlx::postgres::PgAdvisoryLockGuard<sqlx::pool::PoolConnection<sqlx::Postgres>>;

impl PgAdvisory {
    /// Connects a pool.
    ///
    /// # Errors
    /// The client's.
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .connect(url)
            .await
            .map_err(backend)?;
        Ok(Self { pool })
    }
}

#[async_trait]
impl Peer for PgAdvisory {
    async fn acquire(&self, name: &LockName, ttl: Duration) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let lock = sqlx::postgres::PgAdvisoryLock::new(name.as_str());
        let conn = self.pool.acquire().await.map_err(backend)?;
        let guard: AdvisoryGuard = lock.acquire(conn).await.map_err(backend)?;
        lease_with(name, ttl, sent, guard)
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(guard) = take::<AdvisoryGuard>(lease) else {
            return Ok(false);
        };
        guard.release_now().await.map_err(backend)?;
        Ok(true)
    }
    fn label(&self) -> &'static str {
        "sqlx PgAdvisoryLock"
    }
}
