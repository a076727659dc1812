//! Connection options: table name, pool, timeouts, polling, and their defaults.

use std::time::Duration;

use dlock_core::LockError;

/// The default table name.
pub const DEFAULT_TABLE: &str = "dlock_locks";

/// Settings of a [`crate::SqlLock`], set through [`crate::SqlLockBuilder`] or URL
/// query parameters (`table`, `pool_size`, `op_timeout`, `poll_max`, `listen`,
/// `pooler`, `fifo`).
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub table: String,
    pub pool_size: u32,
    pub op_timeout: Duration,
    pub poll_min: Duration,
    pub poll_max: Duration,
    pub notify_fallback: Duration,
    pub listen: bool,
    /// PostgreSQL behind a transaction-mode pooler (PgBouncer `pool_mode=transaction`):
    /// see [`crate::SqlLockBuilder::transaction_pooler`].
    pub transaction_pooler: bool,
    pub create_table: bool,
    /// Whether waiters queue (`crate::queue`); `None`: where they hear their grant
    /// (PostgreSQL with LISTEN), elsewhere once they have polled for ten polling gaps;
    /// see [`crate::SqlLockBuilder::fifo`].
    pub fifo: Option<bool>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            table: DEFAULT_TABLE.into(),
            pool_size: 8,
            op_timeout: Duration::from_secs(5),
            poll_min: Duration::from_millis(4),
            poll_max: Duration::from_millis(100),
            // a queued waiter hears its grant; this is its heartbeat (Redis: the same)
            notify_fallback: Duration::from_secs(5),
            listen: true,
            transaction_pooler: false,
            create_table: true,
            fifo: None,
        }
    }
}

/// Checks a table name: `[A-Za-z_][A-Za-z0-9_]*`, at most 55 bytes (so that
/// `<table>_holders` fits a 63-byte identifier). It is spliced into
/// SQL text (identifiers cannot be bound), so nothing else is allowed.
///
/// # Errors
/// [`LockError::Config`] for anything else.
pub fn validate_table_name(table: &str) -> Result<(), LockError> {
    let mut chars = table.chars();
    // the shared tables `<table>_shared` and `<table>_holders` must fit PostgreSQL's
    // 63-byte identifiers too (a longer name would be cut and could meet another)
    let ok = table.len() <= 55
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(LockError::Config(format!(
            "table name {table:?} is not allowed: use 1-55 characters of [A-Za-z0-9_], not starting with a digit"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_identifiers_only() {
        for ok in ["dlock_locks", "_x", "T1"] {
            assert!(validate_table_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1x",
            "x-y",
            "x;DROP TABLE y",
            "a.b",
            "\"q\"",
            "x y",
            &"x".repeat(56),
        ] {
            assert!(
                matches!(validate_table_name(bad), Err(LockError::Config(_))),
                "{bad}"
            );
        }
    }
}
