//! Redis Sentinel: `redis-sentinel://[user:password@]s1:26379,s2:26379/mastername[/db]`.
//!
//! The sentinels are asked, one after another, which server is the master of
//! `mastername` (`SENTINEL get-master-addr-by-name`); the lock then runs on that server
//! as on any single Redis, and follows the master when the sentinels fail it over (see
//! `crate::conn`). The credentials and database are the master's; the sentinels are
//! reached without them.

use std::time::Duration;

use dlock_core::{LockError, redact_url};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{IntoConnectionInfo, ProtocolVersion};

/// The scheme of a Sentinel URL.
pub(crate) const SCHEME: &str = "redis-sentinel://";

/// The port a sentinel listens on unless the URL says otherwise.
const DEFAULT_PORT: u16 = 26379;

/// Whether `url` names sentinels rather than a server.
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    url.get(..SCHEME.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(SCHEME))
}

/// The sentinels of one master.
pub(crate) struct Sentinels {
    hosts: Vec<String>,
    /// The master's name as the sentinels monitor it.
    name: String,
    /// `redis://USERINFO` and `/DB?QUERY`, around the master's `host:port`.
    userinfo: String,
    tail: String,
    timeout: Duration,
}

impl Sentinels {
    /// Reads a `redis-sentinel://` URL (dlock's own parameters already taken off).
    pub(crate) fn parse(url: &str, timeout: Duration) -> Result<Self, LockError> {
        let shown = redact_url(url);
        let bad = |why: &str| {
            LockError::Config(format!(
                "{shown:?}: {why}; use redis-sentinel://[user:password@]s1:26379,s2:26379/mastername[/db]"
            ))
        };
        let rest = url.get(SCHEME.len()..).unwrap_or_default();
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, format!("?{q}")),
            None => (rest, String::new()),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (format!("{u}@"), h),
            None => (String::new(), authority),
        };
        // a sentinel without a port listens on Sentinel's default
        let hosts: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| {
                if h.ends_with(']') || !h.contains(':') {
                    format!("{h}:{DEFAULT_PORT}")
                } else {
                    h.to_owned()
                }
            })
            .collect();
        if hosts.is_empty() {
            return Err(bad("no sentinel named"));
        }
        let mut parts = path.split('/');
        let name = parts.next().unwrap_or_default().to_owned();
        if name.is_empty() {
            return Err(bad("no master name"));
        }
        let db = match parts.next() {
            Some(db) if !db.is_empty() => {
                db.parse::<u32>()
                    .map_err(|_| bad("the database after the master name is not a number"))?;
                format!("/{db}")
            }
            _ => String::new(),
        };
        if parts.next().is_some() {
            return Err(bad("too many path segments"));
        }
        Ok(Self {
            hosts,
            name,
            userinfo,
            tail: format!("{db}{query}"),
            timeout,
        })
    }

    /// `redis-sentinel://s1,s2/name`, for messages.
    pub(crate) fn shown(&self) -> String {
        format!("{SCHEME}{}/{}", self.hosts.join(","), self.name)
    }

    /// The master's address: asked of every sentinel at once, the first answer whose
    /// server says it is a master (`ROLE`) — a sentinel that has not yet seen a
    /// failover still names the old master, now a replica.
    pub(crate) async fn master(&self) -> Option<(String, u16)> {
        let mut asks = tokio::task::JoinSet::new();
        for h in &self.hosts {
            let (h, name, timeout) = (h.clone(), self.name.clone(), self.timeout);
            asks.spawn(async move {
                tokio::time::timeout(timeout * 2, named_master(&h, &name))
                    .await
                    .ok()
                    .flatten()
            });
        }
        while let Some(answer) = asks.join_next().await {
            if let Ok(Some(addr)) = answer {
                return Some(addr);
            }
        }
        None
    }

    /// The master's address, or why there is none.
    pub(crate) async fn master_or_error(&self) -> Result<(String, u16), LockError> {
        self.master().await.ok_or_else(|| {
            LockError::transient(format!(
                "no sentinel of {} named a master called {:?} (are they up, and is the name right?)",
                self.shown(),
                self.name
            ))
        })
    }

    /// A connection manager for `master` (RESP3, the URL's credentials and database).
    pub(crate) async fn manager(
        &self,
        master: &(String, u16),
        config: ConnectionManagerConfig,
    ) -> redis::RedisResult<ConnectionManager> {
        let url = format!(
            "redis://{}{}{}",
            self.userinfo,
            authority(master),
            self.tail
        );
        let info = url.into_connection_info()?;
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))?;
        client.get_connection_manager_with_config(config).await
    }
}

/// `host:port`, an IPv6 host in brackets.
fn authority((host, port): &(String, u16)) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The master sentinel `h` names for `name`, if that server says it is a master.
async fn named_master(h: &str, name: &str) -> Option<(String, u16)> {
    let client = redis::Client::open(format!("redis://{h}")).ok()?;
    let mut c = client.get_multiplexed_async_connection().await.ok()?;
    let addr: (String, u16) = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(name)
        .query_async::<Option<(String, u16)>>(&mut c)
        .await
        .ok()??;
    let server = redis::Client::open(format!("redis://{}", authority(&addr))).ok()?;
    let mut s = server.get_multiplexed_async_connection().await.ok()?;
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut s).await.ok()?;
    let is_master = matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master");
    is_master.then_some(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_sentinels_a_master_and_a_database() {
        let t = Duration::from_secs(1);
        let s = Sentinels::parse("redis-sentinel://:pw@a:1,b:2/mymaster/3", t).unwrap();
        assert_eq!(s.hosts, ["a:1", "b:2"]);
        assert_eq!((s.name.as_str(), s.userinfo.as_str()), ("mymaster", ":pw@"));
        assert_eq!(s.tail, "/3");
        assert_eq!(s.shown(), "redis-sentinel://a:1,b:2/mymaster");
        let s = Sentinels::parse("redis-sentinel://a:1/m?protocol=resp3", t).unwrap();
        assert_eq!(s.tail, "?protocol=resp3");
        for bad in [
            "redis-sentinel://",
            "redis-sentinel://a:1",
            "redis-sentinel://a:1/",
            "redis-sentinel://a:1/m/x",
            "redis-sentinel://a:1/m/0/extra",
        ] {
            assert!(
                matches!(Sentinels::parse(bad, t), Err(LockError::Config(_))),
                "{bad}"
            );
        }
        let s = Sentinels::parse("redis-sentinel://a,[::1],b:7/m", t).unwrap();
        assert_eq!(s.hosts, ["a:26379", "[::1]:26379", "b:7"]);
        assert_eq!(authority(&("::1".into(), 6379)), "[::1]:6379");
        assert_eq!(authority(&("h".into(), 6379)), "h:6379");
        assert!(is_sentinel_url("REDIS-SENTINEL://a:1/m"));
        assert!(!is_sentinel_url("redis://a:1"));
    }
}
