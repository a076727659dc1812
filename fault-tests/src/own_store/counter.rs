//! The counter workload's store: one record whose value is the history of the tokens
//! that wrote it, space-separated, beside a count of the writes (SQL: a column; etcd:
//! the key's version; ZooKeeper: the node's version). A holder reads it under its token
//! and writes it back with its token appended, through the store's fence helper. The
//! final history and count are the store's own account of the writes it accepted: a
//! write overwritten by a stale one shows as a count above the history's length.

use dlock_any::{Lease, LockError};
use dlock_etcd::etcd_client::{TxnOp, TxnOpResponse};
use dlock_zk::zookeeper_client as zk;

use super::{OwnStore, db, run_of};

/// The store key (SQL row, Redis key, etcd key, ZooKeeper node) of the counter that
/// lock `name`'s holders update.
#[must_use]
pub fn counter_key(name: &str) -> String {
    format!("dlock-faults-counter-{}", run_of(name))
}

/// What the store holds at the end of a run.
#[derive(Clone, Debug)]
pub struct Counter {
    /// The tokens of the writes, oldest first.
    pub history: Vec<u64>,
    /// How many writes the store applied, where it counts them (not Redis).
    pub writes: Option<u64>,
}

fn zk_path(key: &str) -> String {
    format!("/{key}")
}

fn zk_err(what: &'static str) -> impl Fn(zk::Error) -> LockError {
    move |e| LockError::backend(what, e)
}

/// The tokens of a history, oldest first.
///
/// # Errors
/// A history that is not space-separated numbers (the store holds something else).
pub fn tokens(history: &str) -> Result<Vec<u64>, LockError> {
    history
        .split_whitespace()
        .map(|t| {
            t.parse()
                .map_err(|_| LockError::backend_msg(format!("counter history holds {t:?}")))
        })
        .collect()
}

/// `history` with `token` appended.
#[must_use]
pub fn appended(history: &str, token: u64) -> String {
    if history.is_empty() {
        token.to_string()
    } else {
        format!("{history} {token}")
    }
}

impl OwnStore {
    /// Creates the counter (its table, row or node), empty.
    ///
    /// # Errors
    /// A backend error.
    pub async fn prepare_counter(&self, key: &str) -> Result<(), LockError> {
        on_sql!(self, |pool, _fence, d| {
            let create = d.pick(
                "CREATE TABLE IF NOT EXISTS dlock_fault_histories (name TEXT PRIMARY KEY, history TEXT NOT NULL, writes BIGINT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS dlock_fault_histories (name VARCHAR(255) PRIMARY KEY, history MEDIUMTEXT NOT NULL, writes BIGINT NOT NULL) ENGINE=InnoDB",
                "CREATE TABLE IF NOT EXISTS dlock_fault_histories (name TEXT PRIMARY KEY, history TEXT NOT NULL, writes INTEGER NOT NULL)",
            );
            let insert = d.pick(
                "INSERT INTO dlock_fault_histories (name, history, writes) VALUES ($1, '', 0) ON CONFLICT DO NOTHING",
                "INSERT IGNORE INTO dlock_fault_histories (name, history, writes) VALUES (?, '', 0)",
                "INSERT OR IGNORE INTO dlock_fault_histories (name, history, writes) VALUES (?, '', 0)",
            );
            sqlx::query(create).execute(pool).await.map_err(db("create"))?;
            sqlx::query(insert)
                .bind(key)
                .execute(pool)
                .await
                .map_err(db("insert"))?;
        },
            Self::Redis(..) | Self::Etcd(..) => {} // a missing key reads as empty
            Self::ZooKeeper(_, client) => {
                let mode = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                return match client.get().await?.create(&zk_path(key), b"", &mode).await {
                    Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                    Err(e) => Err(zk_err("create")(e)),
                };
            }
        );
        Ok(())
    }

    /// Reads the history under `lease`. Fenced: SQL and Redis raise the fence to its
    /// token (an older holder's later write is refused); etcd reads in a transaction
    /// guarded by the lease's key; ZooKeeper syncs with the leader, then reads (its
    /// write is the guarded step). Unfenced (the control runs): a plain read.
    ///
    /// ZooKeeper's read goes to whichever server this client is connected to, which may
    /// lag the one that told the lock's session it holds: the `sync` makes it see every
    /// write committed before — the previous holder's included.
    ///
    /// # Errors
    /// [`LockError::StaleToken`] or [`LockError::LeaseLost`]: the helper refused; a
    /// backend error.
    pub async fn read_counter(
        &self,
        key: &str,
        lease: &Lease,
        fenced: bool,
    ) -> Result<String, LockError> {
        let token = lease.token();
        let resource = format!("counter/{key}");
        on_sql!(self, |pool, fence, d| {
            in_fenced_tx!(pool, fence, fenced, resource, token, |tx| {
                // MySQL's is a locking read: InnoDB's repeatable-read snapshot could
                // predate the fence
                let sql = d.pick(
                    "SELECT history FROM dlock_fault_histories WHERE name = $1",
                    "SELECT history FROM dlock_fault_histories WHERE name = ? FOR UPDATE",
                    "SELECT history FROM dlock_fault_histories WHERE name = ?",
                );
                Ok(sqlx::query_scalar(sql)
                    .bind(key)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db("read"))?)
            })
        },
            Self::Redis(lock, plain) => Ok(if fenced {
                lock.fence().get(key, token).await?
            } else {
                redis::AsyncCommands::get(&mut plain.clone(), key)
                    .await
                    .map_err(|e| LockError::backend("read", e))?
            }
            .unwrap_or_default()),
            Self::Etcd(lock, client) => {
                if !fenced {
                    return etcd_get(client, key).await.map(|(h, _)| h);
                }
                let resp = lock.guarded_txn(lease, vec![TxnOp::get(key, None)]).await?;
                match resp.op_responses().first() {
                    Some(TxnOpResponse::Get(g)) => Ok(g
                        .kvs()
                        .first()
                        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
                        .unwrap_or_default()),
                    other => Err(LockError::backend_msg(format!(
                        "guarded read of {key}: unexpected answer {other:?}"
                    ))),
                }
            }
            Self::ZooKeeper(_, client) => zk_get(client, key).await.map(|(h, _)| h),
        )
    }

    /// Writes `history` under `lease`, through the backend's fence helper: in the
    /// fenced transaction (SQL), the fenced script (Redis), the guarded transaction
    /// (etcd) or the guarded multi (ZooKeeper) — the check and the write commit
    /// together. Unfenced (the control runs): a plain write.
    ///
    /// # Errors
    /// [`LockError::StaleToken`] or [`LockError::LeaseLost`]: the helper refused; a
    /// backend error.
    pub async fn write_counter(
        &self,
        key: &str,
        lease: &Lease,
        history: &str,
        fenced: bool,
    ) -> Result<(), LockError> {
        let token = lease.token();
        let resource = format!("counter/{key}");
        on_sql!(self, |pool, fence, d| {
            in_fenced_tx!(pool, fence, fenced, resource, token, |tx| {
                let sql = d.sql(
                    "UPDATE dlock_fault_histories SET history = $1, writes = writes + 1 WHERE name = $2",
                    "UPDATE dlock_fault_histories SET history = ?, writes = writes + 1 WHERE name = ?",
                );
                sqlx::query(sql)
                    .bind(history)
                    .bind(key)
                    .execute(&mut *tx)
                    .await
                    .map_err(db("write"))?;
                Ok(())
            })
        },
            Self::Redis(lock, plain) => {
                if fenced {
                    lock.fence().set(key, history, token).await
                } else {
                    redis::AsyncCommands::set(&mut plain.clone(), key, history)
                        .await
                        .map_err(|e| LockError::backend("write", e))
                }
            }
            Self::Etcd(lock, client) => {
                if fenced {
                    lock.guarded_txn(lease, vec![TxnOp::put(key, history, None)])
                        .await
                        .map(drop)
                } else {
                    let mut c = client.clone();
                    c.put(key, history, None)
                        .await
                        .map(drop)
                        .map_err(|e| LockError::backend("write", e))
                }
            }
            Self::ZooKeeper(lock, client) => {
                let path = zk_path(key);
                if fenced {
                    lock.guarded_multi(lease, |w| w.add_set_data(&path, history.as_bytes(), None))
                        .await
                        .map(drop)
                } else {
                    // The store's client outlives the pause (its session is long), so
                    // the woken holder writes: the harm the fence prevents. Should its
                    // session have ended all the same, it opens a new one and writes
                    // anyway (on the old one the write would fail for an unrelated
                    // reason, and a control that does no harm shows nothing).
                    let first = client
                        .get()
                        .await?
                        .set_data(&path, history.as_bytes(), None)
                        .await;
                    match first {
                        Err(
                            zk::Error::SessionExpired
                            | zk::Error::ConnectionLoss
                            | zk::Error::ClientClosed,
                        ) => client
                            .reconnect()
                            .await?
                            .set_data(&path, history.as_bytes(), None)
                            .await
                            .map(drop)
                            .map_err(zk_err("write")),
                        other => other.map(drop).map_err(zk_err("write")),
                    }
                }
            }
        )
    }

    /// The counter as the store holds it now (read without a lease).
    ///
    /// # Errors
    /// A backend error; a history that is not a list of tokens.
    pub async fn counter(&self, key: &str) -> Result<Counter, LockError> {
        let (history, writes): (String, Option<i64>) = on_sql!(self, |pool, _fence, d| {
            let sql = d.sql(
                "SELECT history, writes FROM dlock_fault_histories WHERE name = $1",
                "SELECT history, writes FROM dlock_fault_histories WHERE name = ?",
            );
            sqlx::query_as(sql)
                .bind(key)
                .fetch_one(pool)
                .await
                .map(|(h, w)| (h, Some(w)))
                .map_err(db("read"))?
        },
            Self::Redis(_, plain) => {
                let v: Option<String> = redis::AsyncCommands::get(&mut plain.clone(), key)
                    .await
                    .map_err(|e| LockError::backend("read", e))?;
                (v.unwrap_or_default(), None)
            }
            Self::Etcd(_, client) => etcd_get(client, key).await.map(|(h, v)| (h, Some(v)))?,
            Self::ZooKeeper(_, client) => zk_get(client, key).await.map(|(h, v)| (h, Some(v)))?,
        );
        Ok(Counter {
            history: tokens(&history)?,
            writes: writes.map(|w| u64::try_from(w).unwrap_or(0)),
        })
    }
}

/// A plain (linearizable) read of the key: value and version (puts since creation).
async fn etcd_get(
    client: &dlock_etcd::etcd_client::Client,
    key: &str,
) -> Result<(String, i64), LockError> {
    let mut c = client.clone();
    let resp = c
        .get(key, None)
        .await
        .map_err(|e| LockError::backend("read", e))?;
    Ok(resp.kvs().first().map_or((String::new(), 0), |kv| {
        (
            String::from_utf8_lossy(kv.value()).into_owned(),
            kv.version(),
        )
    }))
}

/// The node's data and version (sets since creation), after a `sync` with the leader.
async fn zk_get(client: &super::ZkClient, key: &str) -> Result<(String, i64), LockError> {
    let client = client.get().await?;
    let path = zk_path(key);
    client.sync(&path).await.map_err(zk_err("sync"))?;
    let (data, stat) = client.get_data(&path).await.map_err(zk_err("read"))?;
    Ok((
        String::from_utf8_lossy(&data).into_owned(),
        i64::from(stat.version),
    ))
}
