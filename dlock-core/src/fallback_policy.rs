//! The [`Fallback`] policies: what to do with an acquisition the lock service could not
//! answer.

use std::fmt;
use std::str::FromStr;

use crate::LockError;

/// What [`crate::FallbackLock`] does when an acquisition fails with
/// [`LockError::Unavailable`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fallback {
    /// Return the error (the default, and what every backend does on its own).
    #[default]
    FailFast,
    /// Take an in-process lock instead: exclusion among this process's callers only,
    /// right for a single-instance deployment. Its leases say so
    /// ([`crate::Lease::fallback`]) and carry token 0, which every fenced store refuses.
    Local,
    /// Hand out a lease that excludes nobody: the caller relies on its work being
    /// idempotent. Its leases say so ([`crate::Lease::fallback`]) and carry token 0, which
    /// every fenced store refuses.
    Proceed,
}

impl Fallback {
    /// The name used in URLs (`fallback=`), logs and metrics.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FailFast => "fail-fast",
            Self::Local => "local",
            Self::Proceed => "proceed",
        }
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Fallback {
    type Err = LockError;

    fn from_str(s: &str) -> Result<Self, LockError> {
        match s {
            "fail-fast" | "failfast" => Ok(Self::FailFast),
            "local" => Ok(Self::Local),
            "proceed" => Ok(Self::Proceed),
            other => Err(LockError::Config(format!(
                "fallback={other:?}: use fail-fast, local or proceed"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockError;

    #[test]
    fn policies_parse_and_print() {
        for p in [Fallback::FailFast, Fallback::Local, Fallback::Proceed] {
            assert_eq!(p.as_str().parse::<Fallback>().unwrap(), p);
        }
        assert!(matches!(
            "maybe".parse::<Fallback>(),
            Err(LockError::Config(_))
        ));
    }
}
