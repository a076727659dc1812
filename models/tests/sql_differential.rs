//! The SQL claim model held to the real statements: 10 000 random operations — takes
//! by three clients, releases, expiries, restores of an older token, rows lost — run
//! through `SqlLock` on a database and through the model's `take` / `release` side by
//! side; every answer and every stored token must agree (a token within what the
//! database clock allowed between two readings around the call). SQLite here; the
//! servers' dialects with the `server-tests` feature.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_core::{DistributedLock, Lease, LockName, random_u64};
use dlock_models::sql_claim::{Expiry, Row, release, take};
use dlock_sql::SqlLock;
use sqlx::AssertSqlSafe;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A raw connection to read and bend the lock table behind the lock's back.
enum Raw {
    Sqlite(sqlx::SqlitePool),
    #[cfg(feature = "server-tests")]
    Postgres(sqlx::PgPool),
    #[cfg(feature = "server-tests")]
    MySql(sqlx::MySqlPool),
}

impl Raw {
    async fn open(url: &str) -> Self {
        let bare = url.split('?').next().unwrap();
        match bare.split(':').next() {
            Some("sqlite") => Self::Sqlite(sqlx::SqlitePool::connect(bare).await.unwrap()),
            #[cfg(feature = "server-tests")]
            Some("postgres") => Self::Postgres(sqlx::PgPool::connect(bare).await.unwrap()),
            #[cfg(feature = "server-tests")]
            Some("mysql") => Self::MySql(sqlx::MySqlPool::connect(bare).await.unwrap()),
            other => panic!("no raw connection for {other:?}"),
        }
    }

    /// The database clock in µs (the hybrid token's floor, as the statements read it).
    async fn now_us(&self) -> u64 {
        let v: i64 = match self {
            Self::Sqlite(p) => sqlx::query_scalar("SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER)")
                .fetch_one(p)
                .await
                .unwrap(),
            #[cfg(feature = "server-tests")]
            Self::Postgres(p) => sqlx::query_scalar("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint")
                .fetch_one(p)
                .await
                .unwrap(),
            #[cfg(feature = "server-tests")]
            Self::MySql(p) => sqlx::query_scalar(
                "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS SIGNED)",
            )
            .fetch_one(p)
            .await
            .unwrap(),
        };
        u64::try_from(v).unwrap()
    }

    /// Runs `sql` with the name bound once (and `token` before it, when given).
    async fn run(&self, sql: &str, token: Option<i64>, name: &str) {
        match self {
            Self::Sqlite(p) => {
                let mut q = sqlx::query(AssertSqlSafe(sql.to_owned()));
                if let Some(t) = token {
                    q = q.bind(t);
                }
                q.bind(name).execute(p).await.unwrap();
            }
            #[cfg(feature = "server-tests")]
            Self::Postgres(p) => {
                let sql = sql.replacen('?', "$1", 1).replacen('?', "$2", 1);
                let mut q = sqlx::query(AssertSqlSafe(sql));
                if let Some(t) = token {
                    q = q.bind(t);
                }
                q.bind(name).execute(p).await.unwrap();
            }
            #[cfg(feature = "server-tests")]
            Self::MySql(p) => {
                let mut q = sqlx::query(AssertSqlSafe(sql.to_owned()));
                if let Some(t) = token {
                    q = q.bind(t);
                }
                q.bind(name.as_bytes()).execute(p).await.unwrap();
            }
        }
    }

    async fn token(&self, name: &str) -> Option<u64> {
        let sql = "SELECT token FROM dlock_locks WHERE name = ?";
        let t: Option<i64> = match self {
            Self::Sqlite(p) => sqlx::query_scalar(sql)
                .bind(name)
                .fetch_optional(p)
                .await
                .unwrap(),
            #[cfg(feature = "server-tests")]
            Self::Postgres(p) => {
                sqlx::query_scalar("SELECT token FROM dlock_locks WHERE name = $1")
                    .bind(name)
                    .fetch_optional(p)
                    .await
                    .unwrap()
            }
            #[cfg(feature = "server-tests")]
            Self::MySql(p) => sqlx::query_scalar(sql)
                .bind(name.as_bytes())
                .fetch_optional(p)
                .await
                .unwrap(),
        };
        t.map(|t| u64::try_from(t).unwrap())
    }

    /// Expires the row at once (as its TTL running out would).
    fn expire_sql(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "UPDATE dlock_locks SET expires_at = 0 WHERE name = ?",
            #[cfg(feature = "server-tests")]
            Self::Postgres(_) => {
                "UPDATE dlock_locks SET expires_at = clock_timestamp() - interval '1 hour' WHERE name = ?"
            }
            #[cfg(feature = "server-tests")]
            Self::MySql(_) => {
                "UPDATE dlock_locks SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE name = ?"
            }
        }
    }
}

async fn statements_agree_with_the_model(url: &str) {
    let lock = SqlLock::connect(url).await.unwrap();
    let raw = Raw::open(url).await;
    let seed = random_u64() | 1;
    let mut rng = Rng(seed);
    let name = LockName::new(&format!("models/differential/{seed:016x}")).unwrap();
    // the model's database: the row (holder as a client's slot + 1, 0 for nobody), its
    // expiry as "live" (1) or "expired" (0)
    let mut row: Option<Row> = None;
    // each acquisition's owner id, as core makes a new one for each
    let mut leases: [Option<(u32, Lease)>; 3] = [None, None, None];
    let mut next_owner = 0u32;
    let mut seen: Vec<u64> = Vec::new();
    let ttl = Duration::from_secs(30);
    for step in 0..10_000 {
        let at = format!("{url}: seed {seed:#x}, step {step}");
        match rng.below(10) {
            0..=4 => {
                let c = usize::try_from(rng.below(3)).unwrap();
                next_owner += 1;
                let owner = next_owner;
                let before = raw.now_us().await;
                let got = lock.try_acquire(&name, ttl).await.unwrap();
                let after = raw.now_us().await;
                // the model at the two readings: the grant must lie between them
                let (low_row, low) = take(Expiry::Latest, row.as_ref(), (owner, 1), 0, before);
                let (_, high) = take(Expiry::Latest, row.as_ref(), (owner, 1), 0, after);
                match (low, got) {
                    (None, None) => {}
                    (Some(low), Some(lease)) => {
                        let t = lease.token().get();
                        let high = high.unwrap();
                        assert!(
                            (low..=high).contains(&t),
                            "{at}: token {t}, the model allows {low}..={high}"
                        );
                        row = low_row.map(|r| Row { token: t, ..r });
                        seen.push(t);
                        leases[c] = Some((owner, lease));
                    }
                    (l, g) => panic!("{at}: the model grants {l:?}, the database {g:?}"),
                }
            }
            5 | 6 => {
                let c = usize::try_from(rng.below(3)).unwrap();
                if let Some((owner, lease)) = leases[c].take() {
                    let released = lock.release(&lease).await.unwrap();
                    let after = release(row.as_ref(), owner, lease.token().get(), 0);
                    assert_eq!(released, after != row, "{at}: release");
                    row = after;
                }
            }
            7 => {
                raw.run(raw.expire_sql(), None, name.as_str()).await;
                row = row.map(|r| Row { expires: 0, ..r });
            }
            8 => {
                if let (Some(r), false) = (&row, seen.is_empty()) {
                    let old = seen[usize::try_from(rng.below(seen.len() as u64)).unwrap()];
                    raw.run(
                        "UPDATE dlock_locks SET token = ? WHERE name = ?",
                        Some(i64::try_from(old).unwrap()),
                        name.as_str(),
                    )
                    .await;
                    row = Some(Row {
                        token: old,
                        ..r.clone()
                    });
                }
            }
            _ => {
                raw.run(
                    "DELETE FROM dlock_locks WHERE name = ?",
                    None,
                    name.as_str(),
                )
                .await;
                row = None;
            }
        }
        assert_eq!(
            raw.token(name.as_str()).await,
            row.as_ref().map(|r| r.token),
            "{at}: the token"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let dir = std::env::temp_dir().join("dlock-models");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("differential-{:016x}.sqlite", random_u64()));
    statements_agree_with_the_model(&format!("sqlite://{}", file.display())).await;
    let _ = std::fs::remove_file(file);
}

#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    statements_agree_with_the_model(&dlock_conformance::required_env("DLOCK_TEST_POSTGRES_URL"))
        .await;
}

#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql() {
    statements_agree_with_the_model(&dlock_conformance::required_env("DLOCK_TEST_MYSQL_URL")).await;
}
