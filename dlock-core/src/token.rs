//! Fencing tokens and owner ids.

use std::fmt;
use std::sync::Arc;

use crate::LockError;

/// A fencing token: strictly increasing across successive holders of one lock name.
///
/// Pass it along with every write to the protected resource; the resource rejects a
/// write carrying a token lower than one it has already seen. That keeps a holder that
/// was paused past its lease (GC, SIGSTOP, a slow network) from doing damage.
///
/// ```
/// use dlock_core::FencingToken;
/// let (a, b) = (FencingToken::new(7), FencingToken::new(8));
/// assert!(a < b);
/// assert_eq!(b.get(), 8);
/// assert_eq!(b.to_string(), "8");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// Wraps a raw token value.
    #[must_use]
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The raw value.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// A token from a server's signed counter (an etcd revision, a ZooKeeper zxid, a
    /// database column). A negative value means the server's data is not what dlock
    /// wrote: [`LockError::Backend`], naming `what` it was.
    ///
    /// # Errors
    /// [`LockError::Backend`] for a negative value.
    ///
    /// ```
    /// use dlock_core::FencingToken;
    /// assert_eq!(FencingToken::from_signed(7, "revision").unwrap().get(), 7);
    /// assert!(FencingToken::from_signed(-1, "revision").is_err());
    /// ```
    pub fn from_signed(value: i64, what: &str) -> Result<Self, LockError> {
        u64::try_from(value)
            .map(Self)
            .map_err(|_| LockError::Backend {
                message: format!("negative {what} {value} where a fencing token was expected"),
                source: None,
            })
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Identifies one acquisition: 128 random bits, written as 32 lowercase hex digits,
/// followed by the holder's [`crate::HolderValue`] when it gave one.
///
/// Every successful `acquire` gets a fresh owner id, and release and renew compare it,
/// so a stale lease can never touch a later holder's lock.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OwnerId(Arc<str>);

impl OwnerId {
    /// A fresh random owner id.
    ///
    /// # Errors
    /// [`LockError::Backend`] if the operating system's random source fails.
    pub fn random() -> Result<Self, LockError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| {
            LockError::backend("operating system random source failed", e.to_string())
        })?;
        let mut hex = String::with_capacity(32);
        for b in bytes {
            hex.push(char::from(HEX[usize::from(b >> 4)]));
            hex.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        Ok(Self(Arc::from(hex)))
    }

    /// A fresh random owner id carrying `value` (see [`crate::HolderValue`]).
    ///
    /// # Errors
    /// As [`OwnerId::random`].
    pub fn random_with_value(value: Option<&crate::HolderValue>) -> Result<Self, LockError> {
        let id = Self::random()?;
        Ok(match value {
            Some(v) => Self(Arc::from(v.owner_text(id.as_str()))),
            None => id,
        })
    }

    /// The holder value this owner id carries, if any.
    #[must_use]
    pub fn holder_value(&self) -> Option<crate::HolderValue> {
        crate::HolderValue::from_owner_text(&self.0)
    }

    /// An owner id read back from a backend (for [`crate::LockInfo`]).
    #[must_use]
    pub fn from_stored(value: &str) -> Self {
        Self(Arc::from(value))
    }

    /// The id as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The mark a revoked holder's owner id becomes on the server
    /// ([`crate::DistributedLock::revoke_holder`]): `!` and the id. No acquisition's
    /// owner id starts with `!` (they start with a hex digit), so none ever equals it:
    /// the revoked lease renews and releases nothing, and the mark keeps the name
    /// taken until it expires.
    #[must_use]
    pub fn revoked(&self) -> Self {
        if self.is_revoked() {
            return self.clone();
        }
        Self(Arc::from(format!("{REVOKED}{}", self.0)))
    }

    /// Whether this is a revoked holder's mark ([`OwnerId::revoked`]).
    #[must_use]
    pub fn is_revoked(&self) -> bool {
        self.0.starts_with(REVOKED)
    }

    /// The owner id a revoked holder's mark stands for (this id itself when it is not
    /// one).
    #[must_use]
    pub fn unrevoked(&self) -> &str {
        self.0.strip_prefix(REVOKED).unwrap_or(&self.0)
    }
}

/// What [`OwnerId::revoked`] puts before an owner id.
const REVOKED: char = '!';

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerId({})", self.0)
    }
}

/// A 64-bit random number from the operating system, for jitter and ids.
#[must_use]
pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // A failing OS random source only makes jitter predictable; it never affects safety.
    let _ = getrandom::fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_ids_are_32_hex_digits_and_unique() {
        let a = OwnerId::random().unwrap();
        let b = OwnerId::random().unwrap();
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
