//! Settings shared by `RedisLock` and `Redlock`, from the builder or URL parameters.

use std::time::Duration;

use dlock_core::backend::{WaitPolicy, take_query};
use dlock_core::{Capabilities, LockError, parse_duration};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "dlock:";

/// How long a released lock's fencing counter is kept: a name unused for a week leaves
/// no key behind. Its next token comes from the server clock, above the old ones as long
/// as that clock never steps back by more than this.
pub const DEFAULT_COUNTER_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a Redlock node grants nothing after it (re)starts, by default: Redlock's
/// *delayed restart*. A node that comes back without its data forgot the keys and
/// counters it granted; resting longer than the longest TTL in use lets every lease it
/// forgot run out before it can grant the name again, and longer than two seconds lets
/// the other nodes' clocks pass every token it granted. Set it (`restart-delay=` in the
/// URL, [`crate::RedlockBuilder::restart_delay`]) above your longest TTL, or to 0 when
/// every node keeps its data across restarts (`appendfsync always`).
pub const DEFAULT_RESTART_DELAY: Duration = Duration::from_secs(60);

/// The longest restart delay accepted: a day.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(24 * 3600);

/// The shortest restart delay accepted (other than 0, off): past how far ahead of the
/// nodes' clocks a grant may run ([`crate::quorum::MAX_AHEAD_MICROS`], 2 s) plus a
/// second of skew, so the other nodes' clocks pass every token a restarted node forgot.
const MIN_RESTART_DELAY: Duration = Duration::from_secs(3);

/// Checks a restart delay: 0 (off), or 3 s to a day.
pub(crate) fn validate_restart_delay(d: Duration) -> Result<(), String> {
    if d.is_zero() || (MIN_RESTART_DELAY..=MAX_RESTART_DELAY).contains(&d) {
        Ok(())
    } else {
        Err(format!(
            "restart delay {d:?}: 0 (off), or between 3s (past the 2 s a grant may run \
             ahead of the nodes' clocks) and 1 day"
        ))
    }
}

/// The shortest `counter-retention` accepted.
const MIN_COUNTER_RETENTION: Duration = Duration::from_secs(1);
/// The longest: ten years, a `PEXPIRE` argument Redis takes.
const MAX_COUNTER_RETENTION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Checks a counter retention: 1 s to 10 years.
pub(crate) fn validate_counter_retention(d: Duration) -> Result<(), String> {
    if (MIN_COUNTER_RETENTION..=MAX_COUNTER_RETENTION).contains(&d) {
        Ok(())
    } else {
        Err(format!("counter retention {d:?}: between 1s and 10 years"))
    }
}

/// What `RedisLock` and `Redlock` declare: leases that expire on their own, waiters
/// told by a message, renewals due together sent as one script call per server.
/// (`RedisLock` adds semaphores and read-write locks, and in its default key layout
/// serves waiters in order, by grants; `Redlock` wakes its waiters to try again, and
/// offers neither: see its docs.)
pub(crate) const CAPABILITIES: Capabilities = Capabilities::per_lease()
    .with_notify(true)
    .with_batched_renewals(true);

/// How a lock's keys are named in Redis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyLayout {
    /// dlock's own: `PREFIX{name}:lock` beside its counter `PREFIX{name}:fence`, one
    /// hash tag (the escaped name) for both. The default.
    #[default]
    Tagged,
    /// The lock key is `PREFIXname` exactly — the layout of redsync, rslock, redis-py's
    /// `Lock` and node-redlock, so that their `SET NX` and dlock's exclude each other
    /// (with the prefix empty, as theirs is) — and the counter `{PREFIXname}:token` in
    /// the lock key's cluster slot (after the name's own hash tag if it has one; the
    /// release channel likewise `…:released`, a proclaimed value `…:value`). Their
    /// holders get no fencing token (`inspect` reports token 0 for them). The
    /// namespace is shared with dlock's other keys: a name whose key is another lock's
    /// counter, channel or value (`{x}:token`, `{x}:released`, `{x}:value`) is refused
    /// with [`LockError::InvalidName`]; do not lock names of
    /// the form `fence:{…}` or `result:{…}` (fences and idempotency records), or
    /// `{x}:sem…` / `{x}:rw…` (semaphores and read-write locks) either.
    Plain,
}

impl std::str::FromStr for KeyLayout {
    type Err = LockError;

    fn from_str(s: &str) -> Result<Self, LockError> {
        match s {
            "tagged" => Ok(Self::Tagged),
            "plain" => Ok(Self::Plain),
            _ => Err(LockError::Config(format!(
                "layout={s}: expected tagged (dlock's own) or plain (the SET NX family's)"
            ))),
        }
    }
}

/// How long a waiter queued on one server (`queue.rs`) sleeps at most between its
/// attempts: its grant comes as a message, so an attempt is only its heartbeat in the
/// queue and a look in case a message was lost (a dropped connection wakes every
/// waiter at once anyway). Long, so a thousand waiters cost the server 200 scripts/s,
/// not a thousand; an entry lives three of these without one.
pub(crate) const QUEUED_FALLBACK: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub prefix: String,
    /// How lock keys are named.
    pub layout: KeyLayout,
    pub timeout: Duration,
    /// How long a released lock's fencing counter lives on before it expires (see
    /// `scripts::RELEASE`).
    pub counter_retention: Duration,
    /// Redlock: how long a node grants nothing after it starts (see
    /// [`DEFAULT_RESTART_DELAY`]).
    pub restart_delay: Duration,
    pub policy: WaitPolicy,
    /// A CA certificate (PEM) to trust for `rediss://` instead of the public web roots.
    pub tls_ca: Option<Vec<u8>>,
    /// A client certificate and its key (PEM) for a server that asks for one
    /// (`tls-auth-clients`).
    pub tls_client: (Option<Vec<u8>>, Option<Vec<u8>>),
}

impl Options {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            prefix: DEFAULT_PREFIX.into(),
            layout: KeyLayout::Tagged,
            timeout,
            counter_retention: DEFAULT_COUNTER_RETENTION,
            restart_delay: DEFAULT_RESTART_DELAY,
            policy: WaitPolicy::default(),
            tls_ca: None,
            tls_client: (None, None),
        }
    }
}

/// Checks a key prefix: no `{` or `}` (they would change the keys' hash tag) and no
/// control characters.
pub(crate) fn validate_prefix(prefix: &str) -> Result<(), LockError> {
    if prefix.contains(['{', '}']) || prefix.chars().any(char::is_control) || prefix.len() > 128 {
        return Err(LockError::Config(format!(
            "key prefix {prefix:?} must be at most 128 characters without braces or control characters"
        )));
    }
    Ok(())
}

/// Takes dlock's own `prefix`, `layout`, `timeout` and `counter-retention` query
/// parameters (and, for a node of a Redlock, `restart-delay`) off a Redis URL, leaving
/// the ones the redis crate reads; any other is refused rather than ignored, so a typo
/// (`timout=`) is not a silent default.
pub(crate) fn take_url_options(
    url: &str,
    opts: &mut Options,
    redlock: bool,
) -> Result<String, LockError> {
    let client_keys = client_keys(url);
    take_query(url, |key, value| {
        match key {
            "prefix" => {
                validate_prefix(value).map_err(|e| e.to_string())?;
                opts.prefix = value.to_owned();
            }
            "timeout" => opts.timeout = parse_duration(value).map_err(|e| e.to_string())?,
            "layout" => opts.layout = value.parse().map_err(|e: LockError| e.to_string())?,
            "counter-retention" => {
                let d = parse_duration(value).map_err(|e| e.to_string())?;
                validate_counter_retention(d)?;
                opts.counter_retention = d;
            }
            "tls-ca" => opts.tls_ca = Some(pem_file(url, key, value)?),
            "tls-cert" => opts.tls_client.0 = Some(pem_file(url, key, value)?),
            "tls-key" => opts.tls_client.1 = Some(pem_file(url, key, value)?),
            "restart-delay" if redlock => {
                let d = parse_duration(value).map_err(|e| e.to_string())?;
                validate_restart_delay(d)?;
                opts.restart_delay = d;
            }
            _ if client_keys.contains(&key) => return Ok(false),
            _ => {
                return Err(format!(
                    "unknown parameter: dlock reads prefix, layout, timeout, counter-retention, \
                     tls-ca, tls-cert, tls-key{}; the Redis client reads {}",
                    if redlock { " and restart-delay" } else { "" },
                    client_keys.join(", ")
                ));
            }
        }
        Ok(true)
    })
}

/// The PEM file a `tls-*` parameter names (percent-decoded), read; only on a
/// `rediss://` URL, and only with the crate's `tls` feature.
fn pem_file(url: &str, key: &str, path: &str) -> Result<Vec<u8>, String> {
    if !cfg!(feature = "tls") {
        return Err(format!(
            "{key}= needs TLS, which this build leaves out (dlock-redis's cargo feature `tls`)"
        ));
    }
    if !url.starts_with("rediss://") {
        return Err(if url.starts_with("redis://") {
            format!("{key}= is for TLS connections: write rediss:// (redis:// is plain TCP)")
        } else {
            format!(
                "{key}= is for one server over TLS (rediss://): Redlock, Cluster and \
                 Sentinel over TLS are not supported yet"
            )
        });
    }
    let path = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
    std::fs::read(path.as_ref()).map_err(|e| format!("cannot read {path}: {e}"))
}

/// The query parameters the redis crate reads, by scheme: a TCP URL carries its database
/// and credentials in the path and authority, a socket URL in the query.
fn client_keys(url: &str) -> &'static [&'static str] {
    if url.starts_with("redis+unix:") || url.starts_with("unix:") {
        &["db", "user", "pass", "protocol"]
    } else {
        &["protocol"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take_url_options_for(url: &str, opts: &mut Options) -> Result<String, LockError> {
        take_url_options(url, opts, false)
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_files_are_read_for_rediss_only() {
        let dir =
            std::env::temp_dir().join(format!("dlock-redis-pem-{:016x}", dlock_core::random_u64()));
        std::fs::create_dir_all(&dir).unwrap();
        let pem = dir.join("a ca.pem");
        std::fs::write(&pem, b"PEM").unwrap();
        let at = pem.display().to_string().replace(' ', "%20");
        let mut o = Options::new(Duration::from_secs(2));
        let rest =
            take_url_options_for(&format!("rediss://h:1?tls-ca={at}&protocol=resp3"), &mut o);
        assert_eq!(rest.unwrap(), "rediss://h:1?protocol=resp3");
        assert_eq!(o.tls_ca.as_deref(), Some(&b"PEM"[..]));
        let plain = take_url_options_for(&format!("redis://h:1?tls-ca={at}"), &mut o);
        assert!(plain.unwrap_err().to_string().contains("write rediss://"));
        let missing = take_url_options_for("rediss://h:1?tls-cert=/nonexistent.pem", &mut o);
        assert!(
            missing
                .unwrap_err()
                .to_string()
                .contains("cannot read /nonexistent.pem")
        );
    }

    #[test]
    fn restart_delay_is_a_redlock_parameter() {
        let mut o = Options::new(Duration::from_secs(2));
        assert_eq!(o.restart_delay, DEFAULT_RESTART_DELAY);
        take_url_options("redis://h:1?restart-delay=90s", &mut o, true).unwrap();
        assert_eq!(o.restart_delay, Duration::from_secs(90));
        take_url_options("redis://h:1?restart-delay=0s", &mut o, true).unwrap();
        assert_eq!(o.restart_delay, Duration::ZERO);
        assert!(take_url_options("redis://h:1?restart-delay=2d", &mut o, true).is_err());
        // shorter than a grant may run ahead of the clocks: a restarted node could rejoin
        // below a token it forgot
        assert!(take_url_options("redis://h:1?restart-delay=1s", &mut o, true).is_err());
        take_url_options("redis://h:1?restart-delay=3s", &mut o, true).unwrap();
        let one_server = take_url_options("redis://h:1?restart-delay=9s", &mut o, false);
        assert!(
            matches!(one_server, Err(LockError::Config(_))),
            "{one_server:?}"
        );
    }

    #[test]
    fn own_and_client_parameters_are_kept_apart_and_others_refused() {
        let mut o = Options::new(Duration::from_secs(2));
        let rest =
            take_url_options_for("redis://h:1/0?protocol=resp3&prefix=x:&timeout=3s", &mut o)
                .unwrap();
        assert_eq!(rest, "redis://h:1/0?protocol=resp3");
        assert_eq!(
            (o.prefix.as_str(), o.timeout),
            ("x:", Duration::from_secs(3))
        );
        let err = take_url_options_for("redis://:pw@h:1?timout=3s", &mut o).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LockError::Config(_)), "{msg}");
        assert!(msg.contains("timout") && !msg.contains("pw"), "{msg}");
        assert_eq!(o.layout, KeyLayout::Tagged);
        take_url_options_for("redis://h:1?layout=plain", &mut o).unwrap();
        assert_eq!(o.layout, KeyLayout::Plain);
        assert!(take_url_options_for("redis://h:1?layout=flat", &mut o).is_err());
        assert!(take_url_options_for("redis+unix:///tmp/r.sock?db=2", &mut o).is_ok());
        assert!(take_url_options_for("redis://h:1?db=2", &mut o).is_err());
    }
}
