//! The shared tables' operations, written once and expanded for each dialect's pool
//! type (sqlx's pools differ per database, and a generic version would spell out more
//! trait bounds than it saves lines).

/// Implements [`crate::store::SharedStore`] for a dialect type with fields `pool` (its
/// sqlx pool, of type `$pool`) and `shared` (an `Arc` of [`super::SharedSql`]). `$channel` is an
/// `Option<&str>` expression: the NOTIFY channel a release statement binds last.
macro_rules! shared_store {
    ($ty:ty, $pool:ty, |$this:ident| $channel:expr) => {
        #[async_trait::async_trait]
        impl $crate::store::SharedStore for $ty {
            async fn take_shared(
                &self,
                req: &$crate::shared::SharedRequest,
            ) -> Result<$crate::shared::SharedTaken, sqlx::Error> {
                let (pool, sql, req) = (
                    self.pool.clone(),
                    std::sync::Arc::clone(&self.shared),
                    req.clone(),
                );
                // held while the caller waits for the answer: a grant whose caller is
                // gone is rolled back instead of committed (no ghost holder)
                let caller = std::sync::Arc::new(());
                let waiting = std::sync::Arc::downgrade(&caller);
                // The transaction runs to its end even if the caller stops waiting: one
                // abandoned halfway would keep the name's row (SQLite: the database)
                // locked until its connection is next used. Acquisitions of different
                // names never wait for each other's rows, but a database may still pick
                // one as a deadlock victim: such a transaction did nothing and runs again.
                let task = tokio::spawn(async move {
                    let mut attempts = 0;
                    loop {
                        match <$ty>::take_shared_once(&pool, &sql, &req, &waiting).await {
                            Err(e) if attempts < 4 && $crate::shared::is_retryable(&e) => {
                                attempts += 1;
                            }
                            other => return other,
                        }
                    }
                });
                let answer = task
                    .await
                    .map_err(|e| sqlx::Error::Protocol(format!("the acquire task failed: {e}")))?;
                drop(caller);
                answer
            }

            async fn renew_shared(
                &self,
                key: &str,
                owner: &str,
                token: i64,
                ttl: std::time::Duration,
            ) -> Result<bool, sqlx::Error> {
                let r = sqlx::query(sqlx::AssertSqlSafe(self.shared.renew.as_str()))
                    .bind(dlock_core::backend::millis(ttl))
                    .bind(key)
                    .bind(owner)
                    .bind(token);
                let r = self.hot.execute(r).await?;
                Ok(r.rows_affected() == 1)
            }

            async fn release_shared(
                &self,
                key: &str,
                owner: &str,
                token: i64,
            ) -> Result<bool, sqlx::Error> {
                let $this = self;
                let q = sqlx::query(sqlx::AssertSqlSafe(self.shared.release.as_str()))
                    .bind(key)
                    .bind(owner)
                    .bind(token);
                let channel: Option<&str> = $channel;
                match channel {
                    // a SELECT of one notification per deleted row
                    Some(ch) => Ok(self.hot.fetch_all(q.bind(ch)).await?.len() == 1),
                    None => Ok(self.hot.execute(q).await?.rows_affected() == 1),
                }
            }

            async fn holders_shared(
                &self,
                key: &str,
            ) -> Result<Vec<$crate::shared::SharedHolder>, sqlx::Error> {
                use sqlx::Row;
                let q = sqlx::query(sqlx::AssertSqlSafe(self.shared.holders.as_str())).bind(key);
                self.hot
                    .fetch_all(q)
                    .await?
                    .iter()
                    .map(|r| {
                        Ok($crate::shared::SharedHolder {
                            owner: r.try_get(0)?,
                            access: r.try_get(1)?,
                            token: r.try_get(2)?,
                            remaining_ms: r.try_get(3)?,
                            permits: r.try_get(4)?,
                        })
                    })
                    .collect()
            }

            async fn prune_batch(&self, idle_ms: i64) -> Result<[u64; 3], sqlx::Error> {
                let mut deleted = [0; 3];
                let statements =
                    $crate::prune::statements(self.shared.dialect, &self.shared.table, idle_ms);
                let mut conn = self.pool.acquire().await?;
                for (n, sql) in deleted.iter_mut().zip(statements) {
                    // MySQL: READ COMMITTED, so the scan keeps no lock on the rows it
                    // passes over (held locks renew meanwhile)
                    if let Some(set) = &self.shared.before_begin {
                        sqlx::query(sqlx::AssertSqlSafe(set.as_str()))
                            .execute(&mut *conn)
                            .await?;
                    }
                    // a transaction of its own: a transaction pooler keeps the
                    // connection for the whole statement (see `crate::hot`)
                    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                    *n = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .persistent(false)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    tx.commit().await?;
                }
                Ok(deleted)
            }
        }

        impl $ty {
            async fn take_shared_once(
                pool: &$pool,
                sql: &$crate::shared::SharedSql,
                req: &$crate::shared::SharedRequest,
                caller: &std::sync::Weak<()>,
            ) -> Result<$crate::shared::SharedTaken, sqlx::Error> {
                use sqlx::Row;
                use $crate::shared::{Decision, Head, HolderRow, SharedTaken, decide};
                let key = req.key.as_str();
                let mut conn = pool.acquire().await?;
                if let Some(pre) = &sql.before_begin {
                    sqlx::query(sqlx::AssertSqlSafe(pre.as_str()))
                        .persistent(sql.persistent)
                        .execute(&mut *conn)
                        .await?;
                }
                let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                let Some((last, first)) = sql.head.split_last() else {
                    return Err(sqlx::Error::Protocol("no head statement".into()));
                };
                for s in first {
                    sqlx::query(sqlx::AssertSqlSafe(s.as_str()))
                        .persistent(sql.persistent)
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                }
                let row = sqlx::query(sqlx::AssertSqlSafe(last.as_str()))
                    .persistent(sql.persistent)
                    .bind(key)
                    .fetch_one(&mut *tx)
                    .await?;
                let head = Head {
                    token: row.try_get(0)?,
                    permits: row.try_get(1)?,
                    intent_until: row.try_get(2)?,
                    now: row.try_get(3)?,
                };
                sqlx::query(sqlx::AssertSqlSafe(sql.purge.as_str()))
                    .persistent(sql.persistent)
                    .bind(key)
                    .bind(head.now)
                    .execute(&mut *tx)
                    .await?;
                let holders = sqlx::query(sqlx::AssertSqlSafe(sql.list.as_str()))
                    .persistent(sql.persistent)
                    .bind(key)
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|r| {
                        Ok(HolderRow {
                            owner: r.try_get(0)?,
                            access: r.try_get(1)?,
                            token: r.try_get(2)?,
                            expires_at: r.try_get(3)?,
                        })
                    })
                    .collect::<Result<Vec<_>, sqlx::Error>>()?;
                let ttl = dlock_core::backend::millis(req.ttl);
                let taken = match decide(req.access, &req.owner, &head, &holders, req.waits) {
                    Decision::Retake(token) => {
                        sqlx::query(sqlx::AssertSqlSafe(sql.retake.as_str()))
                            .persistent(sql.persistent)
                            .bind(head.now + ttl)
                            .bind(key)
                            .bind(req.owner.as_str())
                            .execute(&mut *tx)
                            .await?;
                        SharedTaken::Yes(token)
                    }
                    Decision::Grant if caller.strong_count() == 0 => {
                        // nobody would receive the lease: take nothing
                        tx.rollback().await?;
                        return Ok(SharedTaken::No(None));
                    }
                    Decision::Grant => {
                        // at least the clock in µs: a row pruned and created again
                        // starts above its old tokens (see `prune`)
                        let token = (head.token + 1).max(head.now.saturating_mul(1000));
                        let permits = match req.access {
                            dlock_core::Access::Permit(n) => i64::from(n),
                            _ => head.permits,
                        };
                        // a writer that got in no longer needs its intent
                        let intent = if req.access == dlock_core::Access::Write {
                            0
                        } else {
                            head.intent_until
                        };
                        sqlx::query(sqlx::AssertSqlSafe(sql.grant_head.as_str()))
                            .persistent(sql.persistent)
                            .bind(token)
                            .bind(permits)
                            .bind(intent)
                            .bind(key)
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query(sqlx::AssertSqlSafe(sql.insert_holder.as_str()))
                            .persistent(sql.persistent)
                            .bind(key)
                            .bind(req.owner.as_str())
                            .bind($crate::shared::tag(req.access))
                            .bind(token)
                            .bind(head.now + ttl)
                            .execute(&mut *tx)
                            .await?;
                        SharedTaken::Yes(token)
                    }
                    Decision::Refuse { wait_ms, intent } => {
                        if intent {
                            let until = head.now + dlock_core::backend::millis(req.intent);
                            sqlx::query(sqlx::AssertSqlSafe(sql.intent.as_str()))
                                .persistent(sql.persistent)
                                .bind(key)
                                .bind(req.owner.as_str())
                                .bind(until)
                                .execute(&mut *tx)
                                .await?;
                        }
                        SharedTaken::No(dlock_core::backend::from_millis(wait_ms))
                    }
                    Decision::Mismatch(permits) => SharedTaken::Mismatch(permits),
                };
                tx.commit().await?;
                Ok(taken)
            }
        }
    };
}
