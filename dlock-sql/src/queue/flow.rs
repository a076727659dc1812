//! The queue's transactions, written once and expanded for each dialect's pool type
//! (as `crate::shared`'s flow is).

/// Implements [`crate::store::QueueStore`] for a dialect type with fields `pool`,
/// `shared` (for `persistent` and `before_begin`) and `queue` (an `Arc` of
/// [`super::QueueSql`]).
macro_rules! queue_store {
    ($ty:ty, $pool:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::QueueStore for $ty {
            async fn wait_take(
                &self,
                req: &$crate::queue::QueueRequest,
            ) -> Result<$crate::queue::Queued, sqlx::Error> {
                let (pool, this, req) = (self.pool.clone(), self.tx_parts(), req.clone());
                // run to its end even if the caller stops waiting (see `shared_store!`)
                let task = tokio::spawn(async move {
                    $crate::shared::retry_victims(|| this.wait_take_once(&pool, &req)).await
                });
                task.await
                    .map_err(|e| sqlx::Error::Protocol(format!("the acquire task failed: {e}")))?
            }

            async fn grant_next(
                &self,
                name: &str,
                giving_up: Option<&str>,
            ) -> Result<(), sqlx::Error> {
                let (pool, this, name) = (self.pool.clone(), self.tx_parts(), name.to_owned());
                let giving_up = giving_up.map(str::to_owned);
                let task = tokio::spawn(async move {
                    $crate::shared::retry_victims(|| {
                        this.grant_next_once(&pool, &name, giving_up.as_deref())
                    })
                    .await
                });
                task.await
                    .map_err(|e| sqlx::Error::Protocol(format!("the grant task failed: {e}")))?
            }

            async fn add_queue_column(&self) -> Result<(), sqlx::Error> {
                if self.has_queue_column().await? {
                    return Ok(());
                }
                let add = sqlx::raw_sql(sqlx::AssertSqlSafe(self.queue.add_column.as_str()));
                match add.execute(&self.pool).await {
                    Ok(_) => Ok(()),
                    // another process added it meanwhile
                    Err(_) if self.has_queue_column().await? => Ok(()),
                    Err(e) => Err(e),
                }
            }
        }

        impl $ty {
            async fn has_queue_column(&self) -> Result<bool, sqlx::Error> {
                use sqlx::Row;
                // the simple protocol: no statement to prepare, behind a pooler too
                let q = sqlx::raw_sql(sqlx::AssertSqlSafe(self.queue.has_column.as_str()));
                Ok(q.fetch_one(&self.pool).await?.try_get::<i64, _>(0)? > 0)
            }

            fn tx_parts(&self) -> $crate::queue::TxParts<$db> {
                $crate::queue::TxParts::new(
                    std::sync::Arc::clone(&self.queue),
                    self.shared.persistent,
                    self.shared.before_begin.clone(),
                )
            }
        }

        queue_calls!($pool, $db);

        impl $crate::queue::TxParts<$db> {
            async fn begin<'c>(
                &self,
                conn: &'c mut sqlx::pool::PoolConnection<$db>,
            ) -> Result<sqlx::Transaction<'c, $db>, sqlx::Error> {
                if let Some(pre) = &self.before_begin {
                    sqlx::query(sqlx::AssertSqlSafe(pre.as_str()))
                        .persistent(self.persistent)
                        .execute(&mut **conn)
                        .await?;
                }
                sqlx::Connection::begin(&mut **conn).await
            }

            /// Locks the name's lock row (creating it free if missing) and reads it.
            async fn lock_row(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                name: &str,
            ) -> Result<$crate::queue::LockRow, sqlx::Error> {
                use sqlx::Row;
                let Some((last, first)) = self.sql.lock_row.split_last() else {
                    return Err(sqlx::Error::Protocol("no lock_row statement".into()));
                };
                for s in first {
                    self.q(s).bind(name).execute(&mut **tx).await?;
                }
                let row = self.q(last).bind(name).fetch_one(&mut **tx).await?;
                Ok($crate::queue::LockRow {
                    owner: row.try_get(0)?,
                    remaining_ms: row.try_get(1)?,
                    now_ms: row.try_get(2)?,
                })
            }

            /// Drops the dead entries and reads the oldest live one waiting for the
            /// exclusive lock (`exclusive`) or for a semaphore's or read-write lock's
            /// key (a lock may be named like such a key).
            async fn head(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                name: &str,
                now_ms: i64,
                exclusive: bool,
            ) -> Result<Option<$crate::queue::QueueHead>, sqlx::Error> {
                use sqlx::Row;
                self.q(&self.sql.purge)
                    .bind(name)
                    .bind(now_ms)
                    .execute(&mut **tx)
                    .await?;
                let row = self
                    .q(&self.sql.head)
                    .bind(name)
                    .bind(now_ms)
                    .bind(exclusive)
                    .fetch_optional(&mut **tx)
                    .await?;
                row.map(|r| {
                    Ok($crate::queue::QueueHead {
                        owner: r.try_get(0)?,
                        ttl_ms: r.try_get(1)?,
                        channel: r.try_get(2)?,
                        access: r.try_get(3)?,
                        permits: r.try_get(4)?,
                    })
                })
                .transpose()
            }

            /// Writes `owner` as the holder for `ttl_ms` with the next token.
            async fn set_holder(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                name: &str,
                owner: &str,
                ttl_ms: i64,
            ) -> Result<i64, sqlx::Error> {
                use sqlx::Row;
                let write = self
                    .q(&self.sql.set_holder)
                    .bind(owner)
                    .bind(ttl_ms)
                    .bind(name);
                if self.sql.set_holder_returns {
                    return write.fetch_one(&mut **tx).await?.try_get(0);
                }
                write.execute(&mut **tx).await?;
                self.token_of(tx, name).await
            }

            /// Grants the free lock to the head, if any: writes it as the holder,
            /// removes its entry and tells it on its own channel.
            async fn grant_head(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                name: &str,
                head: &$crate::queue::QueueHead,
            ) -> Result<(), sqlx::Error> {
                let token = self.set_holder(tx, name, &head.owner, head.ttl_ms).await?;
                self.leave_queue(tx, name, &head.owner).await?;
                self.tell(tx, head, token).await?;
                if let Some(tell) = &self.sql.tell_observers {
                    self.q(tell).bind(name).execute(&mut **tx).await?;
                }
                Ok(())
            }

            /// Tells a waiter of its grant on its own channel (PostgreSQL; a waiter
            /// that polls finds it with its next attempt).
            async fn tell(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                head: &$crate::queue::QueueHead,
                token: i64,
            ) -> Result<(), sqlx::Error> {
                if let Some(notify) = &self.sql.notify
                    && !head.channel.is_empty()
                {
                    let payload = $crate::queue::grant_payload(&head.owner, token);
                    self.q(notify)
                        .bind(&head.channel)
                        .bind(payload)
                        .execute(&mut **tx)
                        .await?;
                }
                Ok(())
            }

            /// Removes `owner`'s entry from `name`'s queue.
            async fn leave_queue(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                name: &str,
                owner: &str,
            ) -> Result<(), sqlx::Error> {
                self.q(&self.sql.leave)
                    .bind(name)
                    .bind(owner)
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            async fn wait_take_once(
                &self,
                pool: &$pool,
                req: &$crate::queue::QueueRequest,
            ) -> Result<$crate::queue::Queued, sqlx::Error> {
                use $crate::queue::{Queued, Step};
                if let Some(calls) = self.sql.calls.as_ref().filter(|c| c.present()) {
                    match self.call_take(pool, &calls.take, req).await {
                        Err(e) if calls.missing(&e) => {}
                        done => return done,
                    }
                }
                let (name, owner) = (req.name.as_str(), req.owner.as_str());
                let ttl_ms = dlock_core::backend::millis(req.ttl);
                let mut conn = pool.acquire().await?;
                let mut tx = self.begin(&mut conn).await?;
                let row = self.lock_row(&mut tx, name).await?;
                let head = self.head(&mut tx, name, row.now_ms, true).await?;
                let held = dlock_core::backend::from_millis(Some(row.remaining_ms));
                let queued = match $crate::queue::step(&row, head.as_ref(), owner) {
                    Step::Confirm => {
                        self.q(&self.sql.confirm)
                            .bind(ttl_ms)
                            .bind(name)
                            .bind(owner)
                            .execute(&mut *tx)
                            .await?;
                        self.leave_queue(&mut tx, name, owner).await?;
                        let token = self.token_of(&mut tx, name).await?;
                        Queued::Taken(token)
                    }
                    Step::Take => {
                        let token = self.set_holder(&mut tx, name, owner, ttl_ms).await?;
                        self.leave_queue(&mut tx, name, owner).await?;
                        Queued::Taken(token)
                    }
                    Step::GrantHeadThenJoin => {
                        let Some(head) = head else {
                            return Err(sqlx::Error::Protocol("no head to grant".into()));
                        };
                        self.grant_head(&mut tx, name, &head).await?;
                        if req.joins {
                            self.join(&mut tx, req, row.now_ms).await?;
                        }
                        Queued::Waiting {
                            remaining: dlock_core::backend::from_millis(Some(head.ttl_ms)),
                            counter: None,
                        }
                    }
                    Step::Join => {
                        if req.joins {
                            self.join(&mut tx, req, row.now_ms).await?;
                        }
                        Queued::Waiting {
                            remaining: held,
                            counter: None,
                        }
                    }
                };
                self.sync_queued(&mut tx, name, row.now_ms).await?;
                tx.commit().await?;
                Ok(queued)
            }

            /// Keeps the lock row's `queued_until` true after the queue changed.
            async fn sync_queued(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                name: &str,
                now_ms: i64,
            ) -> Result<(), sqlx::Error> {
                self.q(&self.sql.sync_queued)
                    .bind(name)
                    .bind(now_ms)
                    .bind(name)
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            /// The row's token (read under the row lock this transaction holds).
            async fn token_of(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                name: &str,
            ) -> Result<i64, sqlx::Error> {
                use sqlx::Row;
                self.q(&self.sql.token)
                    .bind(name)
                    .fetch_one(&mut **tx)
                    .await?
                    .try_get(0)
            }

            /// Joins the queue at its end, or moves the entry's deadline on.
            async fn join(
                &self,
                tx: &mut sqlx::Transaction<'_, $db>,
                req: &$crate::queue::QueueRequest,
                now_ms: i64,
            ) -> Result<(), sqlx::Error> {
                use sqlx::Row;
                let last: i64 = self
                    .q(&self.sql.last_seq)
                    .bind(req.name.as_str())
                    .fetch_one(&mut **tx)
                    .await?
                    .try_get(0)?;
                let deadline = now_ms.saturating_add(dlock_core::backend::millis(req.live));
                self.q(&self.sql.join)
                    .bind(req.name.as_str())
                    .bind(req.owner.as_str())
                    .bind(last + 1)
                    .bind(req.access)
                    .bind(req.permits)
                    .bind(dlock_core::backend::millis(req.ttl))
                    .bind(deadline)
                    .bind(req.listener.0)
                    .bind(req.listener.1.as_str())
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            async fn grant_next_once(
                &self,
                pool: &$pool,
                name: &str,
                giving_up: Option<&str>,
            ) -> Result<(), sqlx::Error> {
                if let Some(calls) = self.sql.calls.as_ref().filter(|c| c.present()) {
                    match self.call_grant(pool, &calls.grant, name, giving_up).await {
                        Err(e) if calls.missing(&e) => {}
                        done => return done,
                    }
                }
                let mut conn = pool.acquire().await?;
                let mut tx = self.begin(&mut conn).await?;
                let mut row = self.lock_row(&mut tx, name).await?;
                if let Some(owner) = giving_up {
                    self.leave_queue(&mut tx, name, owner).await?;
                    let given = self
                        .q(&self.sql.give_back)
                        .bind(name)
                        .bind(owner)
                        .execute(&mut *tx)
                        .await?;
                    if given.rows_affected() == 1 {
                        row.remaining_ms = 0;
                    }
                }
                if row.remaining_ms <= 0
                    && let Some(head) = self.head(&mut tx, name, row.now_ms, true).await?
                {
                    self.grant_head(&mut tx, name, &head).await?;
                }
                self.sync_queued(&mut tx, name, row.now_ms).await?;
                tx.commit().await
            }

            fn q<'a>(
                &self,
                sql: &'a str,
            ) -> sqlx::query::Query<'a, $db, <$db as sqlx::Database>::Arguments> {
                sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(self.persistent)
            }
        }
    };
}
