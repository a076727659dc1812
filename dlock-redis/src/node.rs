//! One Redis server: its connection, the scripts run on it, its wake-ups.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{FencingToken, LockError, redact_url};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{IntoConnectionInfo, ProtocolVersion, Value};
use tokio::sync::Notify;

use crate::keys::Keys;
use crate::renewals::{Pending, Renewals};
use crate::scripts;
use crate::wakeups::{SubscriptionGuard, Wakeups};

/// What the acquire script answered.
pub(crate) enum NodeTaken {
    Yes(u64),
    No { pttl: Option<Duration> },
}

pub(crate) struct Node {
    conn: ConnectionManager,
    wakeups: Arc<Wakeups>,
    renewals: Renewals,
    timeout: Duration,
    shown: String,
}

impl Node {
    /// Connects (or, when `lazy`, prepares to connect on first use) with RESP3 so
    /// release notifications arrive on the same multiplexed connection.
    pub(crate) async fn connect(
        url: &str,
        timeout: Duration,
        lazy: bool,
        tls_ca: Option<&[u8]>,
    ) -> Result<Self, LockError> {
        let shown = redact_url(url);
        let info = url
            .into_connection_info()
            .map_err(|e| LockError::Config(format!("cannot read Redis URL {shown:?}: {e}")))?;
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let info = info.set_redis_settings(settings);
        let client = open_client(info, tls_ca)
            .map_err(|e| LockError::Config(format!("cannot use Redis URL {shown:?}: {e}")))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_max_delay(Duration::from_millis(500))
            .set_push_sender(tx)
            .set_automatic_resubscription();
        let conn = if lazy {
            client.get_connection_manager_lazy(config)
        } else {
            tokio::time::timeout(
                timeout * 2,
                client.get_connection_manager_with_config(config),
            )
            .await
            .map_err(|_| LockError::Unavailable {
                message: format!("connecting to {shown}: no answer within {:?}", timeout * 2),
                source: None,
            })?
        }
        .map_err(|e| from_redis(&format!("connecting to {shown}"), e))?;
        let wakeups = Wakeups::start(conn.clone(), rx);
        let renewals = Renewals::start(conn.clone(), timeout, shown.clone());
        Ok(Self {
            conn,
            wakeups,
            renewals,
            timeout,
            shown,
        })
    }

    async fn run<T>(
        &self,
        what: &str,
        f: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LockError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(from_redis(&format!("{what} on {}", self.shown), e)),
            Err(_) => Err(LockError::Unavailable {
                message: format!(
                    "{what} on {}: no answer within {:?}",
                    self.shown, self.timeout
                ),
                source: None,
            }),
        }
    }

    pub(crate) async fn acquire(
        &self,
        keys: &Keys,
        owner: &str,
        ttl: Duration,
    ) -> Result<NodeTaken, LockError> {
        let mut conn = self.conn.clone();
        let (taken, n): (i64, i64) = self
            .run(
                "acquire",
                scripts::ACQUIRE
                    .key(&keys.lock)
                    .key(&keys.fence)
                    .arg(owner)
                    .arg(ttl_ms(ttl))
                    .invoke_async(&mut conn),
            )
            .await?;
        Ok(if taken == 1 {
            NodeTaken::Yes(
                FencingToken::from_signed(n, &format!("fencing counter on {}", self.shown))?.get(),
            )
        } else {
            NodeTaken::No {
                pttl: u64::try_from(n).ok().map(Duration::from_millis),
            }
        })
    }

    pub(crate) async fn raise_fence(&self, keys: &Keys, token: u64) -> Result<(), LockError> {
        let mut conn = self.conn.clone();
        self.run(
            "raise fence",
            scripts::RAISE_FENCE
                .key(&keys.fence)
                .arg(token)
                .invoke_async::<i64>(&mut conn),
        )
        .await
        .map(|_| ())
    }

    /// Queues a renewal with the other renewals due now, sent in one script call.
    pub(crate) fn submit_renew(
        &self,
        key: Arc<str>,
        owner: Arc<str>,
        ttl: Duration,
    ) -> Result<Pending, LockError> {
        self.renewals.submit(key, owner, ttl_ms(ttl))
    }

    pub(crate) async fn release(&self, keys: &Keys, owner: &str) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let n: i64 = self
            .run(
                "release",
                scripts::RELEASE
                    .key(&keys.lock)
                    .arg(owner)
                    .arg(&keys.channel)
                    .invoke_async(&mut conn),
            )
            .await?;
        Ok(n == 1)
    }

    /// The holder's owner, remaining time and token, if the lock key exists.
    pub(crate) async fn inspect(
        &self,
        keys: &Keys,
    ) -> Result<Option<(String, Duration, u64)>, LockError> {
        let mut conn = self.conn.clone();
        let (owner, pttl, token): (Value, i64, Option<u64>) = self
            .run(
                "inspect",
                scripts::INSPECT
                    .key(&keys.lock)
                    .key(&keys.fence)
                    .invoke_async(&mut conn),
            )
            .await?;
        Ok(match owner {
            Value::BulkString(v) => Some((
                String::from_utf8_lossy(&v).into_owned(),
                Duration::from_millis(u64::try_from(pttl).unwrap_or(0)),
                token.unwrap_or(0),
            )),
            _ => None,
        })
    }

    pub(crate) async fn subscribe(
        &self,
        keys: &Keys,
        notify: &Arc<Notify>,
    ) -> Result<SubscriptionGuard, LockError> {
        self.run("subscribe", self.wakeups.subscribe(&keys.channel, notify))
            .await
    }
}

#[cfg(feature = "tls")]
fn open_client(
    info: redis::ConnectionInfo,
    tls_ca: Option<&[u8]>,
) -> redis::RedisResult<redis::Client> {
    match tls_ca {
        Some(ca) => redis::Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(ca.to_vec()),
            },
        ),
        None => redis::Client::open(info),
    }
}

#[cfg(not(feature = "tls"))]
fn open_client(
    info: redis::ConnectionInfo,
    _tls_ca: Option<&[u8]>,
) -> redis::RedisResult<redis::Client> {
    redis::Client::open(info)
}

fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

/// Connection trouble is `Unavailable` (outcome unknown), a server error `Backend`.
pub(crate) fn from_redis(what: &str, e: redis::RedisError) -> LockError {
    let message = format!("{what}: {e}");
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
    {
        return LockError::Config(format!(
            "{message} (check the user and password in the URL)"
        ));
    }
    if e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
    {
        LockError::unavailable(message, e)
    } else {
        LockError::backend(message, e)
    }
}
