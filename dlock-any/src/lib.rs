//! # dlock-any
//!
//! One dependency for services: the [`dlock_core`] API re-exported, every backend
//! behind a cargo feature, and [`connect`], which picks the backend from a URL so the
//! choice is configuration, not code.
//!
//! | URL | backend | feature |
//! |---|---|---|
//! | `memory://` | [`MemoryLock`] (this process only; each `connect` is a new table) | always |
//! | `sqlite://path/to/file.db` | SQLite file, created if missing | `sqlite` (default) |
//! | `postgres://user:pw@host:5432/db` | PostgreSQL | `postgres` |
//! | `mysql://user:pw@host:3306/db`, `mariadb://…` | MySQL / MariaDB | `mysql` |
//!
//! SQL URLs take dlock's own query parameters too: `table`, `pool_size`,
//! `op_timeout` (e.g. `2s`), `poll_max` (e.g. `100ms`), `listen` (`true`/`false`).
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use dlock_any::{DistributedLock, Locker};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_any::LockError> {
//! // e.g. from configuration: "postgres://app@db/app", "sqlite:///var/lib/app/locks.db"
//! let backend: Arc<dyn DistributedLock> = dlock_any::connect("memory://").await?;
//! let locker = Locker::new(backend).with_ttl(Duration::from_secs(30));
//! let guard = locker.lock("billing/invoice-7").await?;
//! println!("fencing token {}", guard.token());
//! guard.release().await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

pub use dlock_core::*;

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use dlock_sql::{SqlLock, SqlLockBuilder};

/// Connects to the backend the URL names (see the table above).
///
/// # Errors
/// [`LockError::Config`] for a malformed URL, an unknown scheme, or a scheme whose
/// cargo feature is off (the message names the feature);
/// [`LockError::Unavailable`] when the server cannot be reached.
pub async fn connect(url: &str) -> Result<Arc<dyn DistributedLock>, LockError> {
    let shown = redact_url(url);
    let Some((scheme, _)) = url.split_once("://").or_else(|| url.split_once(':')) else {
        return Err(LockError::Config(format!(
            "{shown:?} is not a lock URL: it has no scheme (try sqlite:///path/locks.db, postgres://host/db or memory://)"
        )));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "memory" => Ok(Arc::new(MemoryLock::new())),
        "postgres" | "postgresql" => sql(url, "postgres", cfg!(feature = "postgres")).await,
        "mysql" | "mariadb" => sql(url, "mysql", cfg!(feature = "mysql")).await,
        "sqlite" => sql(url, "sqlite", cfg!(feature = "sqlite")).await,
        other => Err(LockError::Config(format!(
            "{shown:?}: unknown scheme {other:?}; known: memory, sqlite, postgres, postgresql, mysql, mariadb"
        ))),
    }
}

async fn sql(
    url: &str,
    feature: &str,
    enabled: bool,
) -> Result<Arc<dyn DistributedLock>, LockError> {
    if !enabled {
        return Err(feature_off(url, feature));
    }
    #[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
    {
        Ok(Arc::new(dlock_sql::SqlLock::connect(url).await?))
    }
    #[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
    {
        Err(feature_off(url, feature))
    }
}

fn feature_off(url: &str, feature: &str) -> LockError {
    LockError::Config(format!(
        "{:?} needs the `{feature}` backend: enable dlock-any's cargo feature `{feature}`",
        redact_url(url)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_off_names_the_feature_and_hides_the_password() {
        let e = feature_off("postgres://u:secret@h/db", "postgres");
        let msg = e.to_string();
        assert!(matches!(e, LockError::Config(_)));
        assert!(
            msg.contains("cargo feature `postgres`") && !msg.contains("secret"),
            "{msg}"
        );
    }
}
