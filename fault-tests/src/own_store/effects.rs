//! The idempotency workload's effects: a request's work looks whether an earlier
//! runner's effect is there, works a while (a call to a slow service), then applies its
//! effect — one row appended to a ledger (SQL), one key set (Redis). Both steps go
//! through the fence of the request's effect: the look raises it, the write checks it.
//! That makes look-then-apply one step against any runner whose lease ran out: a paused
//! runner that wakes after another took its request over and looked is refused, and
//! never applies a second effect. The ledger keeps every row, so duplicates would show.

use std::collections::HashMap;

use dlock_any::{FencingToken, LockError};

use super::{OwnStore, db, run_of};

/// The id of request number `k` of the run on lock `name` (unique to the run).
#[must_use]
pub fn request_id(name: &str, k: u64) -> String {
    format!("{}-{k}", run_of(name))
}

/// The request number of a request id of the run on lock `name`.
fn request_number(name: &str, request: &str) -> Option<u64> {
    request
        .strip_prefix(run_of(name))?
        .strip_prefix('-')?
        .parse()
        .ok()
}

fn effect_key(request: &str) -> String {
    format!("dlock-faults-effect:{request}")
}

fn no_results() -> LockError {
    LockError::unsupported_feature("etcd/zookeeper", "idempotency results")
}

fn token_of(t: i64) -> u64 {
    u64::try_from(t).unwrap_or(0)
}

/// A token as the `BIGINT` it is stored as (the fence refused any larger one already).
fn as_i64(token: FencingToken) -> i64 {
    i64::try_from(token.get()).unwrap_or(i64::MAX)
}

impl OwnStore {
    /// Creates the ledger (SQL; Redis needs nothing). No unique index: a second effect
    /// of a request must be able to land, so that the checker sees it.
    ///
    /// # Errors
    /// A backend error.
    pub async fn prepare_effects(&self) -> Result<(), LockError> {
        on_sql!(self, |pool, _fence, d| {
            let table = d.pick(
                "CREATE TABLE IF NOT EXISTS dlock_fault_effects (request TEXT NOT NULL, token BIGINT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS dlock_fault_effects (request VARCHAR(255) NOT NULL, token BIGINT NOT NULL, KEY (request)) ENGINE=InnoDB",
                "CREATE TABLE IF NOT EXISTS dlock_fault_effects (request TEXT NOT NULL, token INTEGER NOT NULL)",
            );
            sqlx::query(table).execute(pool).await.map_err(db("create"))?;
            if !matches!(d, super::Dialect::MySql) {
                // MySQL's index is part of its table
                let index = "CREATE INDEX IF NOT EXISTS dlock_fault_effects_request ON dlock_fault_effects (request)";
                sqlx::query(index).execute(pool).await.map_err(db("create"))?;
            }
        },
            _ => {}
        );
        Ok(())
    }

    /// Looks for `request`'s effect under `token`, raising the effect's fence: from now
    /// on no runner with an older token can apply it. The token of the effect there, if
    /// any. With `fenced` off (the control runs) a plain read.
    ///
    /// # Errors
    /// [`LockError::StaleToken`]: a later runner has looked already; a backend error.
    pub async fn look_effect(
        &self,
        request: &str,
        token: FencingToken,
        fenced: bool,
    ) -> Result<Option<u64>, LockError> {
        let found: Option<i64> = on_sql!(self, |pool, fence, d| {
            in_fenced_tx!(pool, fence, fenced, format!("effect/{request}"), token, |tx| {
                let sql = d.sql(
                    "SELECT token FROM dlock_fault_effects WHERE request = $1 LIMIT 1",
                    "SELECT token FROM dlock_fault_effects WHERE request = ? LIMIT 1",
                );
                sqlx::query_scalar(sql)
                    .bind(request)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db("look"))?
            })
        },
            Self::Redis(lock, plain) => {
                let key = effect_key(request);
                let found = if fenced {
                    lock.fence().get(&key, token).await?
                } else {
                    redis::AsyncCommands::get(&mut plain.clone(), &key)
                        .await
                        .map_err(|e| LockError::backend("look", e))?
                };
                return Ok(found.and_then(|t| t.parse().ok()));
            }
            Self::Etcd(..) | Self::ZooKeeper(..) => return Err(no_results()),
        );
        Ok(found.map(token_of))
    }

    /// Applies `request`'s effect under `token` — through the fence: refused when a
    /// later runner has looked or applied since this one looked. With `fenced` off (the
    /// control runs) a plain write.
    ///
    /// # Errors
    /// [`LockError::StaleToken`]; a backend error.
    pub async fn apply_effect(
        &self,
        request: &str,
        token: FencingToken,
        fenced: bool,
    ) -> Result<(), LockError> {
        on_sql!(self, |pool, fence, d| {
            in_fenced_tx!(pool, fence, fenced, format!("effect/{request}"), token, |tx| {
                let sql = d.sql(
                    "INSERT INTO dlock_fault_effects (request, token) VALUES ($1, $2)",
                    "INSERT INTO dlock_fault_effects (request, token) VALUES (?, ?)",
                );
                sqlx::query(sql)
                    .bind(request)
                    .bind(as_i64(token))
                    .execute(&mut *tx)
                    .await
                    .map_err(db("apply"))?;
            })
        },
            Self::Redis(lock, plain) => {
                let (key, value) = (effect_key(request), token.get().to_string());
                if fenced {
                    lock.fence().set(&key, &value, token).await?;
                } else {
                    let () = redis::AsyncCommands::set(&mut plain.clone(), &key, &value)
                        .await
                        .map_err(|e| LockError::backend("apply", e))?;
                }
                return Ok(());
            }
            Self::Etcd(..) | Self::ZooKeeper(..) => return Err(no_results()),
        );
        Ok(())
    }

    /// Every effect the store holds for the run on lock `name`, by request number: the
    /// tokens of its ledger rows (SQL), or of its key (Redis, one each) — found by the
    /// run's prefix, so a runner killed before it reported is seen too.
    ///
    /// # Errors
    /// A backend error.
    pub async fn effects_of_run(&self, name: &str) -> Result<HashMap<u64, Vec<u64>>, LockError> {
        let like = format!("{}-%", run_of(name));
        let rows: Vec<(String, i64)> = on_sql!(self, |pool, _fence, d| {
            let sql = d.sql(
                "SELECT request, token FROM dlock_fault_effects WHERE request LIKE $1",
                "SELECT request, token FROM dlock_fault_effects WHERE request LIKE ?",
            );
            sqlx::query_as(sql)
                .bind(&like)
                .fetch_all(pool)
                .await
                .map_err(db("read"))?
        },
            Self::Redis(_, plain) => {
                let mut conn = plain.clone();
                let pattern = effect_key(&format!("{}-*", run_of(name)));
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(&pattern)
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| LockError::backend("read", e))?;
                let mut rows = Vec::new();
                for key in keys {
                    let v: Option<String> = redis::AsyncCommands::get(&mut conn, &key)
                        .await
                        .map_err(|e| LockError::backend("read", e))?;
                    let token = v.and_then(|t| t.parse::<i64>().ok()).unwrap_or(0);
                    let request = key.trim_start_matches(&effect_key("")).to_owned();
                    rows.push((request, token));
                }
                rows
            }
            Self::Etcd(..) | Self::ZooKeeper(..) => return Err(no_results()),
        );
        let mut out: HashMap<u64, Vec<u64>> = HashMap::new();
        for (request, token) in rows {
            if let Some(k) = request_number(name, &request) {
                out.entry(k).or_default().push(token_of(token));
            }
        }
        Ok(out)
    }
}
