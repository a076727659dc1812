//! What a holder says about itself (a leader's address), stored with its lease.
//!
//! The value travels inside the acquisition's owner id — `<32 hex digits>.<value>`,
//! with every byte outside a small safe set percent-encoded — so every backend stores
//! it wherever it already stores the owner (a Redis key's value, an etcd key name, a
//! ZooKeeper node name, an SQL column): written, renewed and deleted with the lease in
//! the same operation, never in a side record that could drift from it.

use std::fmt;

use crate::LockError;

/// The longest holder value, in bytes.
pub const MAX_HOLDER_VALUE: usize = 128;

/// The longest encoded value: with the 32 hex digits and the separator, an owner id
/// stays within 255 bytes (its revoked mark one more), the narrowest owner column
/// (MySQL's `VARCHAR(255)`).
const MAX_ENCODED: usize = 200;

/// What a proclaimed value's stored text starts with.
const PROCLAIMED: &str = "dlock:value=";

/// Separates the random part of an owner id from the encoded holder value.
const SEPARATOR: char = '.';

/// A holder's self-description: 1 to [`MAX_HOLDER_VALUE`] bytes of UTF-8 without
/// control characters, at most 200 bytes once encoded (each byte other than letters,
/// digits and `.:_@+=,~[]` takes three), e.g. `10.0.0.7:8080` or `worker-3`.
///
/// ```
/// use dlock_core::HolderValue;
/// let v = HolderValue::new("orders-api-7:8443")?;
/// assert_eq!(v.as_str(), "orders-api-7:8443");
/// assert!(HolderValue::new("").is_err());
/// assert!(HolderValue::new("line\nbreak").is_err());
/// # Ok::<(), dlock_core::LockError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HolderValue(String);

impl HolderValue {
    /// Checks `value`.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] when it is empty, longer than
    /// [`MAX_HOLDER_VALUE`] bytes, or holds a control character.
    pub fn new(value: &str) -> Result<Self, LockError> {
        if value.is_empty() || value.len() > MAX_HOLDER_VALUE {
            return Err(LockError::InvalidArgument(format!(
                "a holder value must be 1 to {MAX_HOLDER_VALUE} bytes, got {}",
                value.len()
            )));
        }
        if value.chars().any(char::is_control) {
            return Err(LockError::InvalidArgument(
                "a holder value must not contain control characters".into(),
            ));
        }
        let encoded: usize = value.bytes().map(|b| if is_plain(b) { 1 } else { 3 }).sum();
        if encoded > MAX_ENCODED {
            return Err(LockError::InvalidArgument(format!(
                "a holder value must fit {MAX_ENCODED} bytes once encoded (letters, digits and .:_@+=,~[] take one byte, others three); this one takes {encoded}"
            )));
        }
        Ok(Self(value.to_owned()))
    }

    /// The value as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value as a backend stores it once proclaimed
    /// ([`crate::DistributedLock::proclaim`]) in a place of its own that may also hold
    /// other things — an etcd key's value, a ZooKeeper node's data: `dlock:value=`
    /// and the value.
    #[must_use]
    pub fn proclaimed_text(&self) -> String {
        format!("{PROCLAIMED}{}", self.0)
    }

    /// The value in what [`HolderValue::proclaimed_text`] wrote; `None` for anything
    /// else stored there (nothing proclaimed, another program's data).
    #[must_use]
    pub fn from_proclaimed(stored: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(stored).ok()?.strip_prefix(PROCLAIMED)?;
        Self::new(text).ok()
    }

    /// `random` (an owner id's hex digits) with this value appended, encoded.
    pub(crate) fn owner_text(&self, random: &str) -> String {
        let mut out = String::with_capacity(random.len() + 1 + self.0.len() * 3);
        out.push_str(random);
        out.push(SEPARATOR);
        for b in self.0.bytes() {
            if is_plain(b) {
                out.push(char::from(b));
            } else {
                out.push('%');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            }
        }
        out
    }

    /// The value inside an owner id's text, if it carries one.
    pub(crate) fn from_owner_text(owner: &str) -> Option<Self> {
        let (_, encoded) = owner.split_once(SEPARATOR)?;
        let bytes = encoded.as_bytes();
        let mut raw = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = encoded.get(i + 1..i + 3)?;
                raw.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                raw.push(bytes[i]);
                i += 1;
            }
        }
        Self::new(&String::from_utf8(raw).ok()?).ok()
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Bytes every backend takes as they are in a key or node name: no `/` (a path
/// separator in etcd and ZooKeeper), no `-` (ZooKeeper's sequence separator), no `%`
/// (the escape), no quotes or spaces.
fn is_plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b".:_@+=,~[]".contains(&b)
}

impl fmt::Display for HolderValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for HolderValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HolderValue({:?})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_owner_text() {
        for v in [
            "10.0.0.7:8080",
            "worker-3",
            "a/b c%d",
            "ünïcode",
            "[::1]:80",
        ] {
            let value = HolderValue::new(v).unwrap();
            let text = value.owner_text("0123456789abcdef0123456789abcdef");
            assert!(!text.contains('/') && !text[32..].contains('-'), "{text}");
            assert_eq!(HolderValue::from_owner_text(&text), Some(value));
        }
        assert_eq!(
            HolderValue::from_owner_text("0123456789abcdef0123456789abcdef"),
            None
        );
    }

    #[test]
    fn proclaimed_values_read_back_and_nothing_else() {
        let v = HolderValue::new("10.0.0.7:80").unwrap();
        let text = v.proclaimed_text();
        assert_eq!(HolderValue::from_proclaimed(text.as_bytes()), Some(v));
        assert_eq!(HolderValue::from_proclaimed(b"10.0.0.7:80"), None);
        assert_eq!(HolderValue::from_proclaimed(b"dlock:value="), None);
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(HolderValue::new("").is_err());
        assert!(HolderValue::new(&"x".repeat(MAX_HOLDER_VALUE + 1)).is_err());
        assert!(HolderValue::new("tab\there").is_err());
        assert!(HolderValue::new(&"x".repeat(MAX_HOLDER_VALUE)).is_ok());
        // 67 dashes take 201 bytes encoded: more than an owner column holds
        assert!(HolderValue::new(&"-".repeat(67)).is_err());
        assert!(HolderValue::new(&"-".repeat(66)).is_ok());
    }
}
