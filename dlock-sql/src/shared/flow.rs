//! The shared tables' operations, written once and expanded for each dialect's pool
//! type (sqlx's pools differ per database, and a generic version would spell out more
//! trait bounds than it saves lines).

/// Implements [`crate::store::SharedStore`] for a dialect type with fields `pool` (its
/// sqlx pool, of type `$pool`) and `shared` (an `Arc` of [`super::SharedSql`]). `$channel` is an
/// `Option<&str>` expression: the NOTIFY channel a release statement binds last.
macro_rules! shared_store {
    ($ty:ty, $pool:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::SharedStore for $ty {
            async fn take_shared(
                &self,
                req: &$crate::shared::SharedRequest,
            ) -> Result<$crate::shared::SharedTaken, sqlx::Error> {
                let (pool, sql, req, parts) = (
                    self.pool.clone(),
                    std::sync::Arc::clone(&self.shared),
                    req.clone(),
                    self.tx_parts(),
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
                    $crate::shared::retry_victims(|| {
                        <$ty>::take_shared_once(&pool, &sql, &parts, &req, &waiting)
                    })
                    .await
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
            ) -> Result<$crate::store::Released, sqlx::Error> {
                let (pool, sql, parts) = (
                    self.pool.clone(),
                    std::sync::Arc::clone(&self.shared),
                    self.tx_parts(),
                );
                let (key, owner) = (key.to_owned(), owner.to_owned());
                // in the name's transaction, under its head row's lock, so a waiter
                // joining at the same moment is either seen and granted, or sees the
                // permit free; to its end even if the caller stops waiting
                let task = tokio::spawn(async move {
                    $crate::shared::retry_victims(|| {
                        <$ty>::release_shared_once(&pool, &sql, &parts, &key, &owner, token)
                    })
                    .await
                });
                task.await
                    .map_err(|e| sqlx::Error::Protocol(format!("the release task failed: {e}")))?
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

            async fn listed_shared(
                &self,
                starts: [&str; 2],
            ) -> Result<Vec<(String, $crate::shared::SharedHolder)>, sqlx::Error> {
                use sqlx::Row;
                let q = sqlx::query(sqlx::AssertSqlSafe(self.shared.listed.as_str()))
                    .bind(starts[0])
                    .bind(starts[0])
                    .bind(starts[1])
                    .bind(starts[1]);
                self.hot
                    .fetch_all(q)
                    .await?
                    .iter()
                    .map(|r| {
                        Ok((
                            r.try_get(0)?,
                            $crate::shared::SharedHolder {
                                owner: r.try_get(1)?,
                                access: r.try_get(2)?,
                                token: r.try_get(3)?,
                                remaining_ms: r.try_get(4)?,
                                permits: r.try_get(5)?,
                            },
                        ))
                    })
                    .collect()
            }

            async fn grant_next_shared(
                &self,
                key: &str,
                giving_up: Option<&str>,
            ) -> Result<(), sqlx::Error> {
                let (pool, sql, parts) = (
                    self.pool.clone(),
                    std::sync::Arc::clone(&self.shared),
                    self.tx_parts(),
                );
                let (key, giving_up) = (key.to_owned(), giving_up.map(str::to_owned));
                // to its end even if the caller stops waiting, as an acquisition
                let task = tokio::spawn(async move {
                    $crate::shared::retry_victims(|| {
                        <$ty>::grant_next_shared_once(
                            &pool,
                            &sql,
                            &parts,
                            &key,
                            giving_up.as_deref(),
                        )
                    })
                    .await
                });
                task.await
                    .map_err(|e| sqlx::Error::Protocol(format!("the grant task failed: {e}")))?
            }

            async fn prune_batch(&self, idle_ms: i64) -> Result<[u64; 4], sqlx::Error> {
                let mut deleted = [0; 4];
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
                parts: &$crate::queue::TxParts<$db>,
                req: &$crate::shared::SharedRequest,
                caller: &std::sync::Weak<()>,
            ) -> Result<$crate::shared::SharedTaken, sqlx::Error> {
                use $crate::shared::{Decision, SharedTaken, decide};
                let key = req.key.as_str();
                let mut conn = pool.acquire().await?;
                let mut tx = parts.begin(&mut conn).await?;
                let (mut head, holders) = <$ty>::lock_shared(&mut tx, sql, key).await?;
                let ttl = dlock_core::backend::millis(req.ttl);
                // FIFO: nobody passes a live queue, so a queued writer needs no intent to
                // keep readers out; one of a client that does not queue leaves one
                let first_in_line = head.first_in_line.as_ref().is_none_or(|o| *o == req.owner);
                let queued = head.first_in_line.is_some();
                let intent = req.intent.is_some();
                let decision = match decide(req.access, &req.owner, &head, &holders, intent) {
                    Decision::Grant if !first_in_line => Decision::Refuse {
                        wait_ms: None,
                        intent: false,
                    },
                    d => d,
                };
                let taken = match decision {
                    Decision::Retake(token) => {
                        sqlx::query(sqlx::AssertSqlSafe(sql.retake.as_str()))
                            .persistent(sql.persistent)
                            .bind(head.now + ttl)
                            .bind(key)
                            .bind(req.owner.as_str())
                            .execute(&mut *tx)
                            .await?;
                        if queued {
                            parts.leave_queue(&mut tx, key, &req.owner).await?;
                        }
                        SharedTaken::Yes(token)
                    }
                    Decision::Grant if caller.strong_count() == 0 => {
                        // nobody would receive the lease: take nothing
                        tx.rollback().await?;
                        return Ok(SharedTaken::No(None));
                    }
                    Decision::Grant => {
                        let mut holders = holders;
                        let token = <$ty>::grant_shared(
                            &mut tx,
                            sql,
                            key,
                            &mut head,
                            &mut holders,
                            &req.owner,
                            req.access,
                            ttl,
                        )
                        .await?;
                        if queued {
                            parts.leave_queue(&mut tx, key, &req.owner).await?;
                        }
                        // the next in line may fit beside it (readers, permits)
                        <$ty>::grant_in_line(&mut tx, sql, parts, key, &mut head, &mut holders)
                            .await?;
                        SharedTaken::Yes(token)
                    }
                    Decision::Refuse { wait_ms, intent } => {
                        if req.waits {
                            parts.join(&mut tx, &req.queued(), head.now).await?;
                        }
                        if let Some(lasts) = req.intent.filter(|_| intent) {
                            let until = head.now + dlock_core::backend::millis(lasts);
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
                    Decision::Mismatch(permits) => {
                        // asking another count: out of the line until it asks again
                        if queued {
                            parts.leave_queue(&mut tx, key, &req.owner).await?;
                        }
                        SharedTaken::Mismatch(permits)
                    }
                };
                tx.commit().await?;
                Ok(taken)
            }
        }
    };
}
