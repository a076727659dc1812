//! dlock pointed at PostgreSQL's hot standby (`scripts/services up --cluster` starts
//! one): the writes a lock needs are refused, and the error says to use the primary,
//! at once rather than after the acquire's wait.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use dlock_conformance::required_env;
use dlock_core::{DistributedLock, LockError, LockName};
use dlock_sql::SqlLock;

#[tokio::test]
async fn a_standby_is_refused_with_a_hint_at_the_primary() {
    let url = required_env("DLOCK_TEST_POSTGRES_STANDBY_URL");
    let started = Instant::now();
    // the schema is the primary's, replicated; a fresh standby may still refuse its
    // check at connect, which is the same answer one step earlier
    let err = match SqlLock::builder(&url)
        .op_timeout(Duration::from_secs(2))
        .connect()
        .await
    {
        Err(e) => e,
        Ok(lock) => {
            let name = LockName::new("standby/refused").unwrap();
            lock.acquire(&name, Duration::from_secs(5), Duration::from_secs(30))
                .await
                .expect_err("a standby granted a lock")
        }
    };
    assert!(matches!(err, LockError::Backend { .. }), "{err:?}");
    assert!(
        err.to_string().contains("point dlock at the primary"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused only after {:?} (the acquire's wait is 30 s)",
        started.elapsed()
    );
}
