//! An application role that may not create anything in the schema (PostgreSQL 15+'s
//! default for `public`) runs dlock with `create=false` on tables an owner role
//! created: the mutex, its renewal and release, a semaphore and a read-write lock; and
//! the whole conformance suite so.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_conformance::required_env;
use dlock_core::{DistributedLock, DistributedRwLock, DistributedSemaphore, LockName};
use dlock_sql::SqlLock;
use sqlx::Executor as _;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_role_without_create_runs_on_tables_made_for_it() {
    let owner_url = required_env("DLOCK_TEST_POSTGRES_URL");
    let suffix = format!("{:012x}", dlock_core::random_u64() >> 16);
    let (role, table) = (format!("dlock_app_{suffix}"), format!("lp_{suffix}"));
    // the owner creates dlock's tables and functions (the URL's default)
    let sep = if owner_url.contains('?') { '&' } else { '?' };
    let owner = SqlLock::connect(&format!("{owner_url}{sep}table={table}"))
        .await
        .unwrap();
    let admin = sqlx::PgPool::connect(&owner_url).await.unwrap();
    for statement in [
        format!("CREATE ROLE {role} LOGIN PASSWORD 'app'"),
        // PostgreSQL 15+ gives PUBLIC no CREATE on `public`; the role gets none either
        format!("REVOKE CREATE ON SCHEMA public FROM {role}"),
        format!("GRANT USAGE ON SCHEMA public TO {role}"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"),
        format!("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}"),
    ] {
        admin.execute(sqlx::AssertSqlSafe(statement)).await.unwrap();
    }
    let at = owner_url.rfind('@').unwrap();
    let app_url = format!("postgres://{role}:app{}", &owner_url[at..]);
    let sep = if app_url.contains('?') { '&' } else { '?' };

    // as it was: the first connect runs the DDL, which the role may not
    let refused = SqlLock::connect(&format!("{app_url}{sep}table={table}")).await;
    let said = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(said.contains("permission denied"), "{said}");

    let app = SqlLock::connect(&format!("{app_url}{sep}table={table}&create=false"))
        .await
        .unwrap();
    let name = LockName::new(&format!("least-privilege/{suffix}")).unwrap();
    let lease = app.try_acquire(&name, TTL).await.unwrap().expect("free");
    assert!(
        owner.try_acquire(&name, TTL).await.unwrap().is_none(),
        "held"
    );
    let lease = app.renew(&lease).await.unwrap();
    assert!(app.release(&lease).await.unwrap());
    let permit = app
        .try_acquire_permit(&name, 2, TTL)
        .await
        .unwrap()
        .expect("a permit");
    assert!(app.release(&permit).await.unwrap());
    let read = app
        .try_read(&name, TTL)
        .await
        .unwrap()
        .expect("a read side");
    assert!(app.release(&read).await.unwrap());
    let write = app
        .try_write(&name, TTL)
        .await
        .unwrap()
        .expect("the write side");
    assert!(app.release(&write).await.unwrap());

    drop(app);
    for statement in [format!("DROP OWNED BY {role}"), format!("DROP ROLE {role}")] {
        admin.execute(sqlx::AssertSqlSafe(statement)).await.unwrap();
    }
}

/// The whole conformance suite as an application role without `CREATE`, on tables and
/// functions an owner made with `SqlLock::migrate`, granted what
/// `Schema::grants` lists (the suite's own table and role, made once per run).
mod as_a_role_without_create {
    use std::sync::OnceLock;

    use dlock_sql::{Schema, SqlLock};
    use sqlx::Executor as _;

    use super::common;

    const TABLE: &str = "lp_suite";
    const ROLE: &str = "dlock_suite_app";

    /// The role's URL, after the owner made the schema and granted it (once).
    fn app_url() -> String {
        static URL: OnceLock<String> = OnceLock::new();
        URL.get_or_init(|| {
            std::thread::spawn(|| tokio::runtime::Runtime::new().unwrap().block_on(prepare()))
                .join()
                .unwrap()
        })
        .clone()
    }

    async fn prepare() -> String {
        let owner = common::postgres_url();
        let sep = if owner.contains('?') { '&' } else { '?' };
        let owner_table = format!("{owner}{sep}table={TABLE}");
        drop(SqlLock::migrate(&owner_table).await.unwrap());
        let admin = sqlx::PgPool::connect(&owner).await.unwrap();
        let grants = Schema::for_url(&owner_table).unwrap().grants(ROLE).unwrap();
        let role = format!(
            "DO $$ BEGIN CREATE ROLE {ROLE} LOGIN PASSWORD 'suite';
             EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        );
        let revoke = format!("REVOKE CREATE ON SCHEMA public FROM {ROLE}");
        for statement in [role, revoke].into_iter().chain(grants) {
            admin.execute(sqlx::AssertSqlSafe(statement)).await.unwrap();
        }
        let at = owner.rfind('@').unwrap();
        format!(
            "postgres://{ROLE}:suite{}{sep}table={TABLE}&create=false",
            &owner[at..]
        )
    }

    async fn harness() -> common::SqlHarness {
        common::SqlHarness { url: app_url() }
    }

    dlock_conformance::conformance_suite!(harness);
    dlock_conformance::shared_as_mutex_suite!(harness);
}
