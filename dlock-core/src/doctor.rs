//! What decides whether locking on a backend is safe and fast, as the backend reports
//! it: [`crate::DistributedLock::diagnose`], printed by `dlock doctor`.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// Worth knowing; nothing to do.
    Info,
    /// A guarantee is weaker than it could be (a crash can lose the last grants, a
    /// waiter polls instead of being woken).
    Warning,
    /// A guarantee is broken: a lock can be held twice, a token can repeat, or
    /// nothing can be locked at all.
    Critical,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Critical => "CRITICAL",
        })
    }
}

/// One thing a backend found about its server.
///
/// ```
/// use dlock_core::{Finding, Severity};
/// let f = Finding::critical("maxmemory-policy", "allkeys-lru", "set noeviction");
/// assert_eq!(f.severity, Severity::Critical);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// What was checked (`server version`, `maxmemory-policy`, …).
    pub check: String,
    /// What was found.
    pub found: String,
    /// One sentence of advice (empty for plain information).
    pub advice: String,
}

impl Finding {
    /// A finding of `severity`.
    #[must_use]
    pub fn new(
        severity: Severity,
        check: impl Into<String>,
        found: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Self {
            severity,
            check: check.into(),
            found: found.into(),
            advice: advice.into(),
        }
    }

    /// Information: `check` is `found`.
    #[must_use]
    pub fn info(check: impl Into<String>, found: impl Into<String>) -> Self {
        Self::new(Severity::Info, check, found, "")
    }

    /// A weaker guarantee, with advice.
    #[must_use]
    pub fn warning(
        check: impl Into<String>,
        found: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Self::new(Severity::Warning, check, found, advice)
    }

    /// A broken guarantee, with advice.
    #[must_use]
    pub fn critical(
        check: impl Into<String>,
        found: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Self::new(Severity::Critical, check, found, advice)
    }

    /// The same finding about `what` (one of several servers).
    #[must_use]
    pub fn about(mut self, what: &str) -> Self {
        self.check = format!("{what}: {}", self.check);
        self
    }
}

/// A clock offset above this is a clock nobody keeps in time: it will be stepped
/// (by NTP, chrony's `makestep`, an operator), and a step of the clock that decides
/// expiry ends leases early (see the Clocks table in `docs/safety.md`).
pub const CLOCK_OFFSET_CRITICAL: Duration = Duration::from_secs(1);
/// A clock offset above this is worth a look at the hosts' time synchronisation.
pub const CLOCK_OFFSET_WARNING: Duration = Duration::from_millis(100);

/// This host's clock, in milliseconds since the epoch.
#[must_use]
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The finding on a server's clock read at `server_ms` by a request sent at this
/// host's `sent_ms` and answered at `received_ms` (the server read it halfway, give
/// or take half the round trip). `what` names the clock (`server clock`, …).
#[must_use]
pub fn clock_offset(what: &str, server_ms: i64, sent_ms: i64, received_ms: i64) -> Finding {
    let local = sent_ms + (received_ms - sent_ms) / 2;
    let offset = server_ms - local;
    let size = Duration::from_millis(offset.unsigned_abs());
    let found = format!(
        "{offset:+} ms from this host (± {} ms)",
        (received_ms - sent_ms).max(0) / 2 + 1
    );
    let check = format!("{what} offset");
    if size > CLOCK_OFFSET_CRITICAL {
        Finding::critical(
            check,
            found,
            "keep the hosts' clocks synchronised (NTP/chrony): a clock this far off will be \
             stepped, and a step of the clock that decides expiry ends every lease early",
        )
    } else if size > CLOCK_OFFSET_WARNING {
        Finding::warning(
            check,
            found,
            "check the hosts' time synchronisation (chronyc tracking, timedatectl)",
        )
    } else {
        Finding::info(check, found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_offsets_grade_by_size() {
        assert_eq!(
            clock_offset("server clock", 1_050, 1_000, 1_002).severity,
            Severity::Info
        );
        assert_eq!(
            clock_offset("server clock", 1_500, 1_000, 1_002).severity,
            Severity::Warning
        );
        let f = clock_offset("server clock", -5_000, 1_000, 1_002);
        assert_eq!(f.severity, Severity::Critical);
        assert!(f.found.starts_with("-6001 ms"), "{}", f.found);
    }
}
