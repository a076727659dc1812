//! PostgreSQL: `INSERT … ON CONFLICT … RETURNING`, `clock_timestamp()`, LISTEN/NOTIFY.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::grants::GrantSlots;
use dlock_core::backend::{Subscription, from_millis, millis};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{AssertSqlSafe, Row};

use crate::hot::Hot;
use crate::listen::Wakeups;
use crate::queue::QueueSql;
use crate::shared::{Dialect, SharedSql};
use crate::store::{Holder, Released, Renewal, Store, Taken, renewed};

pub(crate) struct Postgres {
    shared: std::sync::Arc<SharedSql>,
    /// The exclusive lock's waiters (`crate::queue`).
    queue: Arc<QueueSql>,
    pool: PgPool,
    /// The single statements of acquire, renew, release and inspect.
    hot: Hot<sqlx::Postgres>,
    /// Where the LISTEN connection goes: its own connection, never one of the pool's,
    /// so waiters cannot starve the holders' renewals and releases of connections.
    listen_to: PgConnectOptions,
    sql: Statements,
    channel: String,
    listen: bool,
    wakeups: tokio::sync::Mutex<Option<Arc<Wakeups>>>,
    /// The grant messages the LISTEN connection hears, by owner id.
    grants: Arc<GrantSlots>,
    /// When starting the LISTEN connection last failed.
    listen_failed: tokio::sync::Mutex<Option<tokio::time::Instant>>,
}

/// How long starting the LISTEN connection may take, and how long after a failed
/// start waiters poll before it is tried again.
const LISTEN_START: Duration = Duration::from_secs(2);

struct Statements {
    create: String,
    take: String,
    /// Renews a batch of held locks, given as four arrays: one prepared statement
    /// whatever the batch's size.
    renew_batch: String,
    release: String,
    revoke: String,
    holder: String,
    held: String,
}

impl Postgres {
    pub(crate) fn new(
        pool: PgPool,
        listen_to: PgConnectOptions,
        table: &str,
        listen: bool,
        transaction_pooler: bool,
    ) -> Self {
        let remaining = "GREATEST(0, CEIL(EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000))::bigint";
        // a new row's first token: see `prune`
        let first = crate::prune::now_us(Dialect::Postgres);
        let nobody_queued = QueueSql::nobody_queued(Dialect::Postgres, "d.");
        let someone_queued = QueueSql::someone_queued(Dialect::Postgres, "");
        Self {
            queue: Arc::new(QueueSql::new(Dialect::Postgres, table)),
            shared: std::sync::Arc::new(SharedSql {
                persistent: !transaction_pooler,
                ..SharedSql::new(Dialect::Postgres, table)
            }),
            hot: Hot::new(pool.clone(), transaction_pooler),
            pool,
            listen_to,
            channel: crate::queue::release_channel(table),
            listen,
            wakeups: tokio::sync::Mutex::new(None),
            grants: Arc::default(),
            listen_failed: tokio::sync::Mutex::new(None),
            sql: Statements {
                create: create_table(table),
                // One round trip either way: the row is taken (token returned), or the
                // holder's remaining time is read from the same snapshot. A row already
                // ours is taken again: an earlier attempt of this acquisition committed
                // after its reply was given up on (or commits after the one that won) —
                // while it is unexpired its token stays, since the lease carries it, and
                // its expiry never goes back: the duplicate's was computed when it began,
                // perhaps before a renewal whose row lock it then waited for. (A row
                // taken from another holder is expired, so the greater is ours.) A free
                // row is not taken past a live queue: its head is granted it instead.
                take: format!(
                    "WITH taken AS (
                        INSERT INTO {table} AS d (name, owner, token, expires_at)
                        VALUES ($1, $2, {first}, clock_timestamp() + $3 * interval '1 millisecond')
                        ON CONFLICT (name) DO UPDATE
                          SET owner = EXCLUDED.owner,
                              token = CASE WHEN d.owner = EXCLUDED.owner AND d.expires_at > clock_timestamp()
                                           THEN d.token ELSE GREATEST(d.token + 1, {first}) END,
                              expires_at = GREATEST(d.expires_at, EXCLUDED.expires_at)
                          WHERE d.owner = EXCLUDED.owner
                             OR (d.expires_at <= clock_timestamp() AND {nobody_queued})
                        RETURNING token)
                     SELECT token, NULL::bigint AS remaining_ms, NULL::bigint AS counter FROM taken
                     UNION ALL
                     SELECT NULL::bigint, {remaining}, token FROM {table}
                       WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM taken)"
                ),
                renew_batch: format!(
                    "UPDATE {table} AS d SET expires_at = clock_timestamp() + v.ttl * interval '1 millisecond'
                     FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS v(name, owner, token, ttl)
                     WHERE d.name = v.name AND d.owner = v.owner AND d.token = v.token
                       AND d.expires_at > clock_timestamp()
                     RETURNING d.name, d.owner"
                ),
                // Expires the row (never deletes it: the token must not go back) and
                // says whether anyone is queued (then the release grants it next);
                // when nobody is, it tells observers the lock is free.
                release: format!(
                    "WITH r AS (
                        UPDATE {table} SET owner = '', expires_at = clock_timestamp()
                        WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp()
                        RETURNING name, {someone_queued} AS queued),
                     n AS (SELECT pg_notify($4, r.name) FROM r WHERE NOT r.queued)
                     SELECT r.queued, (SELECT count(*) FROM n) FROM r"
                ),
                revoke: format!(
                    "UPDATE {table} SET owner = $4
                     WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp()"
                ),
                holder: format!(
                    "SELECT l.owner, l.token, {remaining} AS remaining_ms, v.value
                     FROM {joined} WHERE l.name = $1 AND l.expires_at > clock_timestamp()",
                    joined = crate::values::joined(table)
                ),
                held: format!(
                    "SELECT l.name, l.owner, l.token, {remaining} AS remaining_ms, v.value
                     FROM {joined} WHERE l.expires_at > clock_timestamp()
                     AND starts_with(l.name, $1) ORDER BY l.name",
                    joined = crate::values::joined(table)
                ),
            },
        }
    }

    /// The LISTEN connection, started by the first waiter that needs it. A start
    /// that fails or takes longer than [`LISTEN_START`] (an unreachable server) leaves
    /// waiters polling, and is not tried again for as long.
    async fn wakeups(&self) -> Option<Arc<Wakeups>> {
        let mut slot = self.wakeups.lock().await;
        if let Some(w) = slot.as_ref() {
            return Some(Arc::clone(w));
        }
        let mut failed = self.listen_failed.lock().await;
        if failed.is_some_and(|at| at.elapsed() < LISTEN_START) {
            return None;
        }
        let grants = Arc::clone(&self.grants);
        let start = Wakeups::start(self.listen_to.clone(), &self.channel, grants);
        let error = match tokio::time::timeout(LISTEN_START, start).await {
            Ok(Ok(w)) => {
                *slot = Some(Arc::clone(&w));
                *failed = None;
                return Some(w);
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {LISTEN_START:?}"),
        };
        tracing::warn!(error = %error, "LISTEN failed; waiters poll instead");
        *failed = Some(tokio::time::Instant::now());
        None
    }
}

/// The lock table's `CREATE TABLE` (see [`crate::schema`]).
pub(crate) fn create_table(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            name TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            token BIGINT NOT NULL,
            expires_at TIMESTAMPTZ NOT NULL,
            queued_until BIGINT NOT NULL DEFAULT 0)"
    )
}

#[async_trait]
impl Store for Postgres {
    async fn migrate(&self) -> Result<(), sqlx::Error> {
        // CREATE TABLE IF NOT EXISTS can still fail on a catalog unique index when two
        // sessions race; a transaction-scoped advisory lock serialises them.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('dlock:migrate'))")
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        sqlx::query(AssertSqlSafe(self.sql.create.clone()))
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        for create in self.shared.create.iter().chain(&self.queue.create) {
            sqlx::query(AssertSqlSafe(create.as_str()))
                .persistent(false)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        crate::store::QueueStore::add_queue_column(self).await
    }

    async fn try_take(&self, name: &str, owner: &str, ttl: Duration) -> Result<Taken, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(self.sql.take.as_str()))
            .bind(name)
            .bind(owner)
            .bind(millis(ttl));
        let row = self.hot.fetch_optional(row).await?;
        let Some(row) = row else {
            // held by a row our snapshot did not see yet
            return Ok(Taken::No {
                remaining: None,
                counter: None,
            });
        };
        let token: Option<i64> = row.try_get(0)?;
        let remaining: Option<i64> = row.try_get(1)?;
        Ok(match token {
            Some(t) => Taken::Yes(t),
            None => Taken::No {
                remaining: from_millis(remaining),
                counter: row
                    .try_get::<Option<i64>, _>(2)?
                    .and_then(|c| u64::try_from(c).ok()),
            },
        })
    }

    async fn renew_batch(&self, batch: &[Renewal]) -> Result<Vec<bool>, sqlx::Error> {
        let names: Vec<&str> = batch.iter().map(|r| r.name.as_str()).collect();
        let owners: Vec<&str> = batch.iter().map(|r| r.owner.as_str()).collect();
        let tokens: Vec<i64> = batch.iter().map(|r| r.token).collect();
        let ttls: Vec<i64> = batch.iter().map(|r| millis(r.ttl)).collect();
        let q = sqlx::query(AssertSqlSafe(self.sql.renew_batch.as_str()))
            .bind(names)
            .bind(owners)
            .bind(tokens)
            .bind(ttls);
        let returned = self.hot.fetch_all(q).await?;
        let returned = returned
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<Vec<(String, String)>, sqlx::Error>>()?;
        Ok(renewed(batch, &returned))
    }

    async fn release(&self, name: &str, owner: &str, token: i64) -> Result<Released, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(self.sql.release.as_str()))
            .bind(name)
            .bind(owner)
            .bind(token)
            .bind(&self.channel);
        Ok(match self.hot.fetch_optional(row).await? {
            Some(row) => Released::Yes {
                queued: row.try_get(0)?,
            },
            None => Released::No,
        })
    }

    async fn revoke(
        &self,
        name: &str,
        owner: &str,
        token: i64,
        mark: &str,
    ) -> Result<bool, sqlx::Error> {
        let q = sqlx::query(AssertSqlSafe(self.sql.revoke.as_str()))
            .bind(name)
            .bind(owner)
            .bind(token)
            .bind(mark);
        Ok(self.hot.execute(q).await?.rows_affected() == 1)
    }

    async fn release_granting(
        &self,
        name: &str,
        owner: &str,
        token: i64,
    ) -> Result<Option<Released>, sqlx::Error> {
        let Some(calls) = self.queue.calls.as_ref().filter(|c| c.present()) else {
            return Ok(None);
        };
        let call = sqlx::query(AssertSqlSafe(calls.release.as_str()))
            .bind(name)
            .bind(owner)
            .bind(token);
        match self.hot.fetch_optional(call).await {
            Ok(row) => {
                let released = match row {
                    Some(row) => row.try_get::<Option<bool>, _>(0)?.unwrap_or(false),
                    None => false,
                };
                // (a grant to the head was made in the call)
                Ok(Some(if released {
                    Released::Yes { queued: false }
                } else {
                    Released::No
                }))
            }
            Err(e) if calls.missing(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn holder(&self, name: &str) -> Result<Option<Holder>, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(self.sql.holder.as_str())).bind(name);
        let row = self.hot.fetch_optional(row).await?;
        row.map(|r| Holder::at(&r, 0)).transpose()
    }

    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, sqlx::Error> {
        crate::doctor::postgres(&self.pool, &self.hot, self.listen, &self.shared.table).await
    }

    async fn held(&self, prefix: &str) -> Result<Vec<(String, Holder)>, sqlx::Error> {
        let rows = sqlx::query(AssertSqlSafe(self.sql.held.as_str())).bind(prefix);
        let rows = self.hot.fetch_all(rows).await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, Holder::at(r, 1)?)))
            .collect()
    }

    async fn subscribe(&self, name: &str) -> Option<Subscription> {
        if !self.listen {
            return None;
        }
        Some(self.wakeups().await?.join(name))
    }

    async fn grant_listener(&self) -> Option<(i64, String)> {
        if !self.listen {
            return None;
        }
        self.wakeups().await?.grant_listener()
    }

    fn grants(&self) -> Option<&GrantSlots> {
        self.listen.then_some(&*self.grants)
    }

    async fn fence(&self, resource: &str, token: i64) -> Result<i64, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let stored = crate::fence::raise_postgres(
            &mut tx,
            &self.shared.table,
            resource,
            token,
            self.shared.persistent,
        )
        .await?;
        tx.commit().await?;
        Ok(stored)
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }
}

// A release of the lock table always notifies observers when nobody is queued, and a
// grant tells its waiter, so listening clients are woken by one that does not listen.
dialect_parts!(Postgres, sqlx::postgres::PgPool, sqlx::Postgres);
