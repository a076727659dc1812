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

    /// The master's address: every sentinel is asked at once (each within twice the
    /// timeout), and the answers are tried newest configuration first — the highest
    /// `config-epoch`, then the most sentinels — until one's server says it is a
    /// master (`ROLE`, with the URL's credentials). A sentinel that has not yet seen a
    /// failover still names the old master; and an old master that restarted says it
    /// is a master until the sentinels make it a replica, so the epoch, not the first
    /// answer, decides.
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
        let mut named: Vec<((String, u16), u64)> = Vec::new();
        while let Some(answer) = asks.join_next().await {
            if let Ok(Some(one)) = answer {
                named.push(one);
            }
        }
        for addr in newest_first(named) {
            if tokio::time::timeout(self.timeout * 2, self.says_master(&addr))
                .await
                .unwrap_or(false)
            {
                return Some(addr);
            }
        }
        None
    }

    /// Whether the server at `addr` answers `ROLE` as a master (reached as the lock
    /// reaches it: the URL's credentials). A user not allowed `ROLE` takes the
    /// sentinels' word for it.
    async fn says_master(&self, addr: &(String, u16)) -> bool {
        let url = format!("redis://{}{}", self.userinfo, authority(addr));
        let Ok(server) = redis::Client::open(url) else {
            return false;
        };
        let Ok(mut s) = server.get_multiplexed_async_connection().await else {
            return false;
        };
        match redis::cmd("ROLE")
            .query_async::<Vec<redis::Value>>(&mut s)
            .await
        {
            Ok(role) => is_master_role(&role),
            Err(e) => e.code() == Some("NOPERM"),
        }
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

/// The master sentinel `h` names for `name` (`SENTINEL MASTER`), with the
/// configuration epoch it knows it from.
async fn named_master(h: &str, name: &str) -> Option<((String, u16), u64)> {
    let client = redis::Client::open(format!("redis://{h}")).ok()?;
    let mut c = client.get_multiplexed_async_connection().await.ok()?;
    let fields: std::collections::HashMap<String, String> = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(name)
        .query_async(&mut c)
        .await
        .ok()?;
    let port = fields.get("port")?.parse().ok()?;
    let epoch = fields
        .get("config-epoch")
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    Some(((fields.get("ip")?.clone(), port), epoch))
}

/// The masters named, each once, newest configuration epoch first, then by how many
/// sentinels named it.
fn newest_first(named: Vec<((String, u16), u64)>) -> Vec<(String, u16)> {
    let mut tally: Vec<((String, u16), u64, usize)> = Vec::new();
    for (addr, epoch) in named {
        match tally.iter_mut().find(|(a, _, _)| *a == addr) {
            Some(t) => {
                t.1 = t.1.max(epoch);
                t.2 += 1;
            }
            None => tally.push((addr, epoch, 1)),
        }
    }
    tally.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)));
    tally.into_iter().map(|(addr, _, _)| addr).collect()
}

/// Whether a `ROLE` answer is a master's.
pub(crate) fn is_master_role(role: &[redis::Value]) -> bool {
    matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master")
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
        // the newest configuration first, then the most-named
        let a = || ("a".to_owned(), 1);
        let b = || ("b".to_owned(), 2);
        let c = || ("c".to_owned(), 3);
        assert_eq!(
            newest_first(vec![
                (a(), 3),
                (b(), 4),
                (a(), 3),
                (c(), 3),
                (c(), 3),
                (c(), 3)
            ]),
            [b(), c(), a()]
        );
        assert_eq!(newest_first(Vec::new()), Vec::<(String, u16)>::new());
        assert!(!is_sentinel_url("redis://a:1"));
    }
}
