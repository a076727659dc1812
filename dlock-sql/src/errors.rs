//! sqlx errors as `LockError`s.

use dlock_core::LockError;

/// Maps a sqlx error: connection trouble and lock contention inside the database are
/// `Unavailable` (worth a retry), everything else the server said is `Backend`.
pub(crate) fn from_sqlx(what: &str, e: sqlx::Error) -> LockError {
    explained(what, e, None)
}

/// As [`from_sqlx`], with `why` (what the store knows that the database did not say)
/// after the database's message.
pub(crate) fn explained(what: &str, e: sqlx::Error, why: Option<String>) -> LockError {
    let transient = match &e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => {
            // class 08: the connection broke (a pooler in front says so for the server)
            db.code().is_some_and(|c| c.starts_with("08"))
                || is_transient_db_code(code_of(db.as_ref()).as_deref())
        }
        _ => false,
    };
    if matches!(e, sqlx::Error::Configuration(_)) {
        return LockError::Config(format!("{what}: {e}"));
    }
    let mut message = format!("{what}: {e}");
    if let Some(why) = why {
        message.push_str("; ");
        message.push_str(&why);
    }
    if let sqlx::Error::Database(db) = &e
        && is_read_only(code_of(db.as_ref()).as_deref())
    {
        message.push_str(
            " (the server is read-only: a standby or replica? point dlock at the primary; \
             `dlock doctor URL` checks)",
        );
    }
    if let sqlx::Error::Database(db) = &e {
        if is_missing_schema(db.as_ref()) {
            message.push_str(
                " (dlock's tables are missing: a role that may create tables makes them with \
                 `dlock migrate` — `dlock migrate --print` shows the statements — or by \
                 connecting without create=false)",
            );
        } else if is_denied(code_of(db.as_ref()).as_deref()) {
            message.push_str(
                " (this role lacks a privilege: creating dlock's tables needs a role that may, \
                 `dlock migrate`; `dlock migrate --print --grant ROLE` prints what a role \
                 running with create=false needs)",
            );
        }
    }
    if transient {
        LockError::unavailable(message, e)
    } else {
        LockError::backend(message, e)
    }
}

/// A failed first connection to a server database (shown as `shown`): a pooler dlock
/// was not told about is named with the parameter that fixes it.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn connect_error(shown: &str, e: sqlx::Error) -> LockError {
    // PgBouncer's answer to a parameter sqlx sends at startup: a pooler dlock was not
    // told about
    if let sqlx::Error::Database(db) = &e
        && db.message().starts_with("unsupported startup parameter")
    {
        return LockError::Config(format!(
            "connecting to {shown}: {}: a pooler such as PgBouncer answers; add \
             pooler=transaction to the URL",
            db.message()
        ));
    }
    from_sqlx(&format!("connecting to {shown}"), e)
}

/// Whether `e` says the connection itself is gone or unusable, so the statement may be
/// made again on another: an I/O or protocol failure, or the server (or pooler) ending
/// the session — SQLSTATE class 08 (connection exception; PgBouncer reports its own
/// errors, "server conn crashed?" among them, as `08P01`) or 57P (operator
/// intervention: shutdown, restart).
pub(crate) fn is_broken(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("57P") || c.starts_with("08")),
        _ => false,
    }
}

/// The code the lists below name: MySQL's error number (its SQLSTATE is a broad class —
/// a lock wait timeout and `--read-only` both report `HY000`), else the SQLSTATE
/// (SQLite: its extended result code).
fn code_of(db: &dyn sqlx::error::DatabaseError) -> Option<String> {
    #[cfg(feature = "mysql")]
    if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        // tagged: MySQL's numbers and SQLite's extended codes meet (1290 is both)
        return Some(format!("mysql:{}", mysql.number()));
    }
    db.code().map(std::borrow::Cow::into_owned)
}

/// Whether the server says a table or function of dlock's is not there: PostgreSQL's
/// `undefined_table` and `undefined_function`, MySQL's `ER_NO_SUCH_TABLE`, SQLite's
/// "no such table".
fn is_missing_schema(db: &dyn sqlx::error::DatabaseError) -> bool {
    match code_of(db).as_deref() {
        Some("42P01" | "mysql:1146") => true,
        // undefined_function, which also says an operator is missing
        Some("42883") => db.message().starts_with("function"),
        Some("1") => db.message().starts_with("no such table"),
        _ => false,
    }
}

/// Whether `code` says the role may not do what was asked: PostgreSQL's
/// `insufficient_privilege`, MySQL's table, column and database access denials.
fn is_denied(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("42501" | "mysql:1142" | "mysql:1143" | "mysql:1044")
    )
}

/// Whether `code` says the server refuses writes: PostgreSQL's
/// `read_only_sql_transaction` (a hot standby, `default_transaction_read_only`),
/// MySQL's `--read-only` and read-only transactions. Not retried: pointed at a standby,
/// dlock would wait out every acquire; the caller is told to fix the URL instead.
fn is_read_only(code: Option<&str>) -> bool {
    matches!(code, Some("25006" | "mysql:1290" | "mysql:1792"))
}

fn is_transient_db_code(code: Option<&str>) -> bool {
    matches!(
        code,
        // SQLite BUSY / LOCKED (and their extended codes end in these)
        Some("5" | "6" | "261" | "262" | "517" | "773")
        // PostgreSQL: serialization, deadlock, admin shutdown, cannot connect now, too many connections
        | Some("40001" | "40P01" | "57P01" | "57P02" | "57P03" | "53300")
        // MySQL/MariaDB: lock wait timeout, deadlock, too many connections (a server gone
        // is an I/O error)
        | Some("mysql:1205" | "mysql:1213" | "mysql:1040")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    /// A database's answer with SQLSTATE `code`.
    #[derive(Debug)]
    struct Answer(&'static str);

    impl std::fmt::Display for Answer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SQLSTATE {}", self.0)
        }
    }
    impl std::error::Error for Answer {}
    impl sqlx::error::DatabaseError for Answer {
        fn message(&self) -> &str {
            self.0
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn answer(code: &'static str) -> sqlx::Error {
        sqlx::Error::Database(Box::new(Answer(code)))
    }

    #[test]
    fn a_broken_connection_is_an_outage_to_retry() {
        let io = || sqlx::Error::Io(std::io::Error::other("eof"));
        assert!(is_broken(&io()));
        assert!(matches!(
            from_sqlx("x", io()),
            LockError::Unavailable { .. }
        ));
        // PgBouncer's own errors ("server conn crashed?"), a lost link, a shutdown
        for code in ["08P01", "08006", "08S01", "57P01"] {
            assert!(is_broken(&answer(code)), "{code}");
            assert!(
                matches!(from_sqlx("x", answer(code)), LockError::Unavailable { .. }),
                "{code}"
            );
        }
        // a statement's own error is an answer, not an outage
        for code in ["23505", "42P01", "22003"] {
            assert!(!is_broken(&answer(code)), "{code}");
            assert!(
                matches!(from_sqlx("x", answer(code)), LockError::Backend { .. }),
                "{code}"
            );
        }
        assert!(!is_broken(&sqlx::Error::RowNotFound));
    }

    #[test]
    fn a_read_only_server_is_named_and_not_retried() {
        for code in ["25006", "mysql:1290", "mysql:1792"] {
            let e = from_sqlx("acquire", answer(code));
            assert!(matches!(e, LockError::Backend { .. }), "{code}: {e:?}");
            assert!(e.to_string().contains("point dlock at the primary"), "{e}");
        }
        let e = from_sqlx("acquire", answer("23505"));
        assert!(!e.to_string().contains("read-only"), "{e}");
    }
}
