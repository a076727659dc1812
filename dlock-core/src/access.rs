//! How a grant shares its name: the mutex, a semaphore's permit, a reader, a writer.

use std::fmt;
use std::time::Duration;

use crate::{FencingToken, LockError, OwnerId};

/// The most permits a semaphore may have: every contender of a queue backend reads
/// the entries ahead of it, so the count bounds that listing.
pub const MAX_PERMITS: u32 = 10_000;

/// How a lease shares its name with others.
///
/// A mutex, a semaphore and a read-write lock of the same name are three different
/// things (each backend keeps them apart): `Exclusive` leases only meet other
/// `Exclusive` ones, `Permit` leases other permits, `Read` and `Write` each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Access {
    /// The mutex ([`crate::DistributedLock::acquire`]): one holder.
    Exclusive,
    /// One of a counting semaphore's permits: at most this many holders at once. Every
    /// holder of a name holds under the same count: another count is refused
    /// ([`LockError::PermitsMismatch`]) or waits until the name is idle.
    Permit(u32),
    /// A read-write lock's reader: shares the name with other readers, never with a
    /// writer.
    Read,
    /// A read-write lock's writer: alone, like the mutex.
    Write,
}

impl Access {
    /// Checks the permit count of [`Access::Permit`]: 1 to [`MAX_PERMITS`].
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for a count out of range.
    pub fn validate(self) -> Result<Self, LockError> {
        match self {
            Self::Permit(n) if n == 0 || n > MAX_PERMITS => Err(LockError::InvalidArgument(
                format!("a semaphore needs 1 to {MAX_PERMITS} permits, not {n}"),
            )),
            other => Ok(other),
        }
    }

    /// `true` for the accesses of a read-write lock.
    #[must_use]
    pub fn is_rw(self) -> bool {
        matches!(self, Self::Read | Self::Write)
    }

    /// A short tag for keys, node names and logs: `x`, `p<N>`, `r`, `w`.
    #[must_use]
    pub fn tag(self) -> String {
        match self {
            Self::Exclusive => "x".into(),
            Self::Permit(n) => format!("p{n}"),
            Self::Read => "r".into(),
            Self::Write => "w".into(),
        }
    }

    /// Reads a [`Access::tag`] back; `None` for anything else.
    #[must_use]
    pub fn from_tag(tag: &str) -> Option<Self> {
        match tag {
            "x" => Some(Self::Exclusive),
            "r" => Some(Self::Read),
            "w" => Some(Self::Write),
            _ => tag
                .strip_prefix('p')
                .filter(|n| !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse().ok())
                .map(Self::Permit),
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exclusive => f.write_str("exclusive"),
            Self::Permit(n) => write!(f, "one of {n} permits"),
            Self::Read => f.write_str("read"),
            Self::Write => f.write_str("write"),
        }
    }
}

/// One current holder of a semaphore or a read-write lock, as the server sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holding {
    /// How it holds the name.
    pub access: Access,
    /// Its owner id.
    pub owner: OwnerId,
    /// Its fencing token.
    pub token: FencingToken,
    /// Time until the server expires it (for per-session backends, the session
    /// timeout).
    pub remaining: Duration,
}

impl Holding {
    /// A holder's description.
    #[must_use]
    pub fn new(access: Access, owner: OwnerId, token: FencingToken, remaining: Duration) -> Self {
        Self {
            access,
            owner,
            token,
            remaining,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_read_back() {
        for a in [
            Access::Exclusive,
            Access::Permit(1),
            Access::Permit(MAX_PERMITS),
            Access::Read,
            Access::Write,
        ] {
            assert_eq!(Access::from_tag(&a.tag()), Some(a));
        }
        for bad in ["", "p", "p0", "p01", "p-1", "px", "q", "pp3"] {
            assert_eq!(Access::from_tag(bad), None, "{bad}");
        }
    }

    #[test]
    fn permit_counts_are_bounded() {
        assert!(Access::Permit(0).validate().is_err());
        assert!(Access::Permit(MAX_PERMITS + 1).validate().is_err());
        assert_eq!(Access::Permit(3).validate().ok(), Some(Access::Permit(3)));
        assert_eq!(Access::Read.validate().ok(), Some(Access::Read));
    }
}
