//! One Redis server: its connection, the scripts run on it, its wake-ups.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::backend::{Pending, Subscription, millis_u64, within};
use dlock_core::{FencingToken, LockError, redact_url};
use redis::{IntoConnectionInfo, ProtocolVersion};

use crate::conn::{Conn, manager_config};
use crate::courtesy::Courtesy;
use crate::errors::from_redis;
use crate::keys::Keys;
use crate::options::Options;
use crate::queue::Queueing;
use crate::renewals::{self, Renewal, Renewals};
use crate::scripts;
use crate::wakeups::Wakeups;
use dlock_core::backend::grants::{Answer, GrantSlots};

pub(crate) struct Node {
    pub(crate) conn: Conn,
    wakeups: Arc<Wakeups>,
    renewals: Renewals,
    pub(crate) timeout: Duration,
    /// See [`scripts::RELEASE`].
    pub(crate) counter_retention: Duration,
    shown: String,
    /// Names released to listeners in the plain layout (`courtesy.rs`).
    courtesy: Courtesy,
}

impl Node {
    /// Connects (or, when `lazy`, prepares to connect on first use) with RESP3 so
    /// release notifications arrive on the same multiplexed connection.
    pub(crate) async fn connect(url: &str, opts: &Options, lazy: bool) -> Result<Self, LockError> {
        let timeout = opts.timeout;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (conn, shown) = if crate::sentinel::is_sentinel_url(url) {
            Self::follow_master(url, opts, tx).await?
        } else if crate::cluster::is_cluster_url(url) {
            if opts.tls_ca.is_some() {
                return Err(LockError::Config(
                    "TLS to a Redis Cluster is not supported yet".into(),
                ));
            }
            (
                crate::cluster::connect(url, timeout, tx).await?,
                redact_url(url),
            )
        } else {
            let conn = Self::open(url, opts, lazy, manager_config(timeout, tx)).await?;
            (Conn::fixed(conn), redact_url(url))
        };
        let wakeups = Wakeups::start(conn.clone(), rx);
        let renewals = renewals::start(conn.clone(), timeout, shown.clone());
        Ok(Self {
            conn,
            wakeups,
            renewals,
            timeout,
            counter_retention: opts.counter_retention,
            shown,
            courtesy: Courtesy::default(),
        })
    }

    /// The master the sentinels of a `redis-sentinel://` URL name, followed.
    async fn follow_master(
        url: &str,
        opts: &Options,
        pushes: tokio::sync::mpsc::UnboundedSender<redis::PushInfo>,
    ) -> Result<(Conn, String), LockError> {
        let timeout = opts.timeout;
        if opts.tls_ca.is_some() {
            return Err(LockError::Config(
                "TLS to a master found through Redis Sentinel is not supported yet".into(),
            ));
        }
        let sentinels = crate::sentinel::Sentinels::parse(url, timeout)?;
        let shown = sentinels.shown();
        let what = format!("connecting to the master of {shown}");
        let (master, manager) = within(timeout * 4, &what, async {
            let master = sentinels.master_or_error().await?;
            let manager = sentinels
                .manager(&master, manager_config(timeout, pushes.clone()))
                .await
                .map_err(|e| from_redis(&what, e))?;
            Ok((master, manager))
        })
        .await?;
        let conn = Conn::following(manager, sentinels, master, timeout, pushes);
        Ok((conn, shown))
    }

    /// A connection manager for one server's URL.
    async fn open(
        url: &str,
        opts: &Options,
        lazy: bool,
        config: redis::aio::ConnectionManagerConfig,
    ) -> Result<redis::aio::ConnectionManager, LockError> {
        let timeout = opts.timeout;
        let shown = redact_url(url);
        let info = url
            .into_connection_info()
            .map_err(|e| LockError::Config(format!("cannot read Redis URL {shown:?}: {e}")))?;
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let info = info.set_redis_settings(settings);
        // the connection manager retries a refused connection for seconds, then says
        // only that: a server that is down is named at once (not for lazy connections,
        // which start during an outage on purpose)
        let at = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port)
            | redis::ConnectionAddr::TcpTls { host, port, .. } => Some(format!("{host}:{port}")),
            _ => None,
        };
        let client = open_client(info, opts)
            .map_err(|e| LockError::Config(format!("cannot use Redis URL {shown:?}: {e}")))?;
        if lazy {
            client
                .get_connection_manager_lazy(config)
                .map_err(|e| from_redis(&format!("connecting to {shown}"), e))
        } else {
            if let Some(at) = &at {
                dlock_core::backend::any_reachable("Redis", &[at], timeout).await?;
            }
            let what = format!("connecting to {shown}");
            within(timeout * 2, &what, async {
                client
                    .get_connection_manager_with_config(config)
                    .await
                    .map_err(|e| from_redis(&what, e))
            })
            .await
        }
    }

    pub(crate) async fn run<T>(
        &self,
        what: &str,
        f: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LockError> {
        let what = format!("{what} on {}", self.shown);
        within(self.timeout, &what, async {
            f.await.map_err(|e| from_redis(&what, e))
        })
        .await
    }

    /// Runs a prepared script call within the timeout.
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        what: &str,
        call: redis::ScriptInvocation<'_>,
    ) -> Result<T, LockError> {
        let mut conn = self.conn.clone();
        self.run(what, call.invoke_async(&mut conn)).await
    }

    /// Takes the lock for `owner` at the node's next token; with `queueing`, a caller
    /// that will wait is queued when it is held (`crate::queue`).
    pub(crate) async fn claim(
        &self,
        keys: &Keys,
        owner: &str,
        ttl: Duration,
        queueing: Option<Queueing>,
    ) -> Result<Answer, LockError> {
        // the plain layout: a waiter woken by our release goes first
        let head_start = match keys.fifo {
            false => self.courtesy.stay_back(&keys.lock).await,
            true => None,
        };
        let mut conn = self.conn.clone();
        let (taken, n, counter): (i64, i64, i64) = self
            .run(
                "acquire",
                scripts::ACQUIRE
                    .key(&keys.lock)
                    .key(&keys.fence)
                    .key(&keys.queue)
                    .key(&keys.waiters)
                    .arg(owner)
                    .arg(millis_u64(ttl))
                    .arg(Queueing::mode(queueing))
                    .arg(Queueing::live_ms(queueing))
                    .arg(&keys.channel)
                    .arg(self.conn.publish_command())
                    .arg(u8::from(keys.fifo))
                    .invoke_async(&mut conn),
            )
            .await?;
        if let Some(length) = head_start {
            self.courtesy
                .after_head_start(&keys.lock, length, taken == 1);
        }
        Ok(if taken == 1 {
            Answer::taken(self.token(n)?)
        } else {
            Answer::held(
                u64::try_from(n).ok().map(Duration::from_millis),
                u64::try_from(counter).unwrap_or(0),
            )
        })
    }

    /// The fencing token `n` a script answered, checked.
    pub(crate) fn token(&self, n: i64) -> Result<FencingToken, LockError> {
        FencingToken::from_signed(n, &format!("fencing counter on {}", self.shown))
    }

    /// Queues a renewal with the other renewals due now, sent in one script call.
    pub(crate) fn submit_renew(
        &self,
        key: Arc<str>,
        owner: Arc<str>,
        ttl: Duration,
    ) -> Result<Pending<bool>, LockError> {
        self.renewals.submit(Renewal {
            key,
            owner,
            ttl_ms: millis_u64(ttl),
        })
    }

    /// Releases `owner`'s hold, handing the lock to the oldest live waiter; for an owner
    /// that does not hold it, leaves the queue (`scripts::RELEASE`). Whether it held.
    ///
    /// While a cluster slot migrates, a script that names a key missing on its node is
    /// refused (TRYAGAIN) — the queue's keys are missing whenever no one waits — so a
    /// refused release is made again naming the lock and its counter only, leaving the
    /// queue alone (queued waiters then find the lock free at their next look).
    pub(crate) async fn release(&self, keys: &Keys, owner: &str) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let call = |queue: bool| {
            let mut call = scripts::RELEASE.prepare_invoke();
            call.key(&keys.lock).key(&keys.fence);
            if queue {
                call.key(&keys.queue).key(&keys.waiters);
            }
            call.arg(owner)
                .arg(&keys.channel)
                .arg(millis_u64(self.counter_retention))
                .arg(self.conn.publish_command())
                .arg(u8::from(queue));
            call
        };
        let n: i64 = self
            .run("release", async {
                match call(keys.fifo).invoke_async(&mut conn).await {
                    Err(e) if keys.fifo && e.code() == Some("TRYAGAIN") => {
                        call(false).invoke_async(&mut conn).await
                    }
                    answer => answer,
                }
            })
            .await?;
        if n == 2 && !keys.fifo {
            self.courtesy.released_to_listeners(&keys.lock);
        }
        Ok(n >= 1)
    }

    /// Puts `mark` in place of `owner` while it holds the lock, keeping its expiry
    /// (`scripts::REVOKE`). Whether it did.
    pub(crate) async fn revoke(
        &self,
        keys: &Keys,
        owner: &str,
        mark: &str,
    ) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let mut call = scripts::REVOKE.prepare_invoke();
        call.key(&keys.lock).arg(owner).arg(mark);
        let n: i64 = self.run("revoke", call.invoke_async(&mut conn)).await?;
        if n == -1 {
            return Err(LockError::backend_msg(format!(
                "revoke: the key {} has no expiry, so it is no lease of dlock's; break it with --now",
                keys.lock
            )));
        }
        Ok(n == 1)
    }

    /// Every key matching `pattern` (`SCAN`, a page at a time, so the server is never
    /// blocked by a `KEYS`); on a cluster, on each of its masters.
    pub(crate) async fn scan(&self, pattern: &str) -> Result<Vec<String>, LockError> {
        if let Conn::Cluster { data, .. } = &self.conn {
            let what = format!("scan on {}", self.shown);
            let mut keys = crate::cluster::scan(data, pattern, self.timeout)
                .await
                .map_err(|e| from_redis(&what, e))?;
            keys.sort();
            keys.dedup();
            return Ok(keys);
        }
        let mut conn = self.conn.clone();
        let mut keys = Vec::new();
        let mut cursor = 0_u64;
        loop {
            let (next, page): (u64, Vec<String>) = self
                .run(
                    "scan",
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(pattern)
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut conn),
                )
                .await?;
            keys.extend(page);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// Registers for the next release of `keys`' lock.
    pub(crate) async fn subscribe(&self, channel: &str) -> Result<Subscription, LockError> {
        self.run("subscribe", self.wakeups.subscribe(channel)).await
    }

    /// Registers a queued waiter for its grant on `channel` (its own): its grant slot
    /// opens once the server confirmed the subscription, and closes with it.
    pub(crate) async fn subscribe_grant(&self, channel: &str) -> Result<Subscription, LockError> {
        let subscription = self
            .run("subscribe", self.wakeups.subscribe_own(channel))
            .await?;
        self.wakeups.grants.open(channel);
        Ok(subscription)
    }

    /// The grant slots of this node's queued waiters.
    pub(crate) fn grants(&self) -> &GrantSlots {
        &self.wakeups.grants
    }
}

/// A client for `info`, trusting `opts`' CA (else the public web roots rustls carries) and presenting
/// its client certificate, where given.
#[cfg(feature = "tls")]
fn open_client(info: redis::ConnectionInfo, opts: &Options) -> redis::RedisResult<redis::Client> {
    let client_tls = match &opts.tls_client {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: cert.clone(),
            client_key: key.clone(),
        }),
        (None, None) => None,
        _ => {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a client certificate needs both tls-cert= and tls-key=",
            )));
        }
    };
    if opts.tls_ca.is_none() && client_tls.is_none() {
        return redis::Client::open(info);
    }
    redis::Client::build_with_tls(
        info,
        redis::TlsCertificates {
            client_tls,
            root_cert: opts.tls_ca.clone(),
        },
    )
}

#[cfg(not(feature = "tls"))]
fn open_client(info: redis::ConnectionInfo, _opts: &Options) -> redis::RedisResult<redis::Client> {
    redis::Client::open(info)
}
