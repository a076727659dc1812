//! Validated lock names.

use std::fmt;
use std::sync::Arc;

use crate::LockError;

/// The longest accepted lock name, in bytes of UTF-8.
pub const MAX_NAME_LEN: usize = 256;

/// A validated lock name: 1..=256 bytes of UTF-8 without control characters.
///
/// `/` and `:` are ordinary characters that callers use as separators
/// (`orders/42`, `billing:invoice:7`); each adapter maps names into its own key space
/// so that no name can escape the adapter's prefix or collide with another name.
///
/// ```
/// use dlock_core::LockName;
/// let name = LockName::new("orders/42").unwrap();
/// assert_eq!(name.as_str(), "orders/42");
/// assert!(LockName::new("").is_err());
/// assert!(LockName::new("tab\there").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockName(Arc<str>);

impl LockName {
    /// Validates `name`.
    ///
    /// # Errors
    /// [`LockError::InvalidName`] when it is empty, longer than [`MAX_NAME_LEN`] bytes or
    /// contains a control character.
    pub fn new(name: &str) -> Result<Self, LockError> {
        let reason = if name.is_empty() {
            Some("must not be empty")
        } else if name.len() > MAX_NAME_LEN {
            Some("longer than 256 bytes")
        } else if name.chars().any(char::is_control) {
            Some("contains a control character")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(LockError::InvalidName {
                name: name.chars().take(64).collect(),
                reason,
            }),
            None => Ok(Self(Arc::from(name))),
        }
    }

    /// The name as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl TryFrom<&str> for LockName {
    type Error = LockError;
    fn try_from(value: &str) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl std::str::FromStr for LockName {
    type Err = LockError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl AsRef<str> for LockName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// What a lock name can be given as: a string (validated when used) or a [`LockName`]
/// (already valid: used as is, never parsed again). Every call of
/// [`crate::Locker`] and [`crate::Election`] that takes a name takes one of these.
pub trait ToLockName {
    /// The validated name.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], as [`LockName::new`].
    fn to_lock_name(&self) -> Result<LockName, LockError>;
}

impl ToLockName for LockName {
    fn to_lock_name(&self) -> Result<LockName, LockError> {
        Ok(self.clone())
    }
}

impl ToLockName for str {
    fn to_lock_name(&self) -> Result<LockName, LockError> {
        LockName::new(self)
    }
}

impl ToLockName for String {
    fn to_lock_name(&self) -> Result<LockName, LockError> {
        LockName::new(self)
    }
}

impl ToLockName for std::borrow::Cow<'_, str> {
    fn to_lock_name(&self) -> Result<LockName, LockError> {
        LockName::new(self)
    }
}

impl<T: ToLockName + ?Sized> ToLockName for &T {
    fn to_lock_name(&self) -> Result<LockName, LockError> {
        (**self).to_lock_name()
    }
}

/// Names checked, sorted byte-wise and de-duplicated: the order in which
/// [`crate::Locker::lock_all`] takes a set of names, so that two overlapping sets taken
/// by any two callers can never wait on each other.
///
/// ```
/// let names = dlock_core::canonical_names(["b", "a", "b"]).unwrap();
/// assert_eq!(names.iter().map(|n| n.as_str()).collect::<Vec<_>>(), ["a", "b"]);
/// ```
///
/// # Errors
/// [`LockError::InvalidName`]; [`LockError::InvalidArgument`] for no names at all.
pub fn canonical_names<I, S>(names: I) -> Result<Vec<LockName>, LockError>
where
    I: IntoIterator<Item = S>,
    S: ToLockName,
{
    let mut out = names
        .into_iter()
        .map(|n| n.to_lock_name())
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    out.dedup();
    if out.is_empty() {
        return Err(LockError::InvalidArgument("no lock names given".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_and_deduplicated() {
        let names = canonical_names(["b", "a", "b", "c/1"]).unwrap();
        let names: Vec<_> = names.iter().map(LockName::as_str).collect();
        assert_eq!(names, ["a", "b", "c/1"]);
        assert!(canonical_names(Vec::<String>::new()).is_err());
        assert!(canonical_names(["ok", ""]).is_err());
        let parsed = LockName::new("x").unwrap();
        assert_eq!(canonical_names([&parsed]).unwrap(), [parsed]);
    }

    #[test]
    fn accepts_separators_unicode_and_max_length() {
        for ok in [
            "a",
            "orders/42",
            "billing:invoice:7",
            "ünïcødé/✓",
            "..",
            "a b",
        ] {
            assert_eq!(LockName::new(ok).unwrap().as_str(), ok);
        }
        assert!(LockName::new(&"x".repeat(MAX_NAME_LEN)).is_ok());
    }

    #[test]
    fn rejects_empty_long_and_control() {
        for bad in ["", "a\nb", "\0", "x\u{7f}", "\u{85}"] {
            assert!(
                matches!(LockName::new(bad), Err(LockError::InvalidName { .. })),
                "{bad:?}"
            );
        }
        assert!(matches!(
            LockName::new(&"x".repeat(MAX_NAME_LEN + 1)),
            Err(LockError::InvalidName { .. })
        ));
        // 255 ASCII bytes + a 2-byte char = 257 bytes
        let long = format!("{}é", "x".repeat(255));
        assert!(LockName::new(&long).is_err());
    }
}
