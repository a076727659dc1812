//! sqlx errors as `LockError`s.

use dlock_core::LockError;

/// Maps a sqlx error: connection trouble and lock contention inside the database are
/// `Unavailable` (worth a retry), everything else the server said is `Backend`.
pub(crate) fn from_sqlx(what: &str, e: sqlx::Error) -> LockError {
    let transient = match &e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => is_transient_db_code(db.code().as_deref()),
        _ => false,
    };
    if matches!(e, sqlx::Error::Configuration(_)) {
        return LockError::Config(format!("{what}: {e}"));
    }
    let message = format!("{what}: {e}");
    if transient {
        LockError::unavailable(message, e)
    } else {
        LockError::backend(message, e)
    }
}

fn is_transient_db_code(code: Option<&str>) -> bool {
    matches!(
        code,
        // SQLite BUSY / LOCKED (and their extended codes end in these)
        Some("5" | "6" | "261" | "262" | "517" | "773")
        // PostgreSQL: serialization, deadlock, admin shutdown, cannot connect now, too many connections
        | Some("40001" | "40P01" | "57P01" | "57P02" | "57P03" | "53300")
        // MySQL/MariaDB: lock wait timeout, deadlock, too many connections, server gone
        | Some("1205" | "1213" | "1040" | "2006" | "2013")
    )
}
