//! The shared tables' grants: a holder written under the name's head-row lock, and
//! the waiters first in line granted while they fit — after an acquisition that got
//! in (readers and permits may fit beside it), after a release that found waiters,
//! and when a waiter gives up. Written once and expanded for each dialect's pool type.

/// Reads a queue entry's access back (`crate::shared::tag`).
pub(crate) fn access_of(tag: &str, permits: i64) -> dlock_core::Access {
    match tag {
        "w" => dlock_core::Access::Write,
        "r" => dlock_core::Access::Read,
        _ => dlock_core::Access::Permit(u32::try_from(permits).unwrap_or(0)),
    }
}

/// Implements the grant helpers for a dialect type (see the module doc); `$db` is its
/// sqlx database.
macro_rules! shared_grants {
    ($ty:ty, $pool:ty, $db:ty) => {
        impl $ty {
            /// Locks the key's head row (creating it if missing), drops the expired
            /// holders and reads the rest.
            async fn lock_shared(
                tx: &mut sqlx::Transaction<'_, $db>,
                sql: &$crate::shared::SharedSql,
                key: &str,
            ) -> Result<($crate::shared::Head, Vec<$crate::shared::HolderRow>), sqlx::Error> {
                use sqlx::Row;
                let q = |s: &str| {
                    sqlx::query(sqlx::AssertSqlSafe(s.to_owned())).persistent(sql.persistent)
                };
                let Some((last, first)) = sql.head.split_last() else {
                    return Err(sqlx::Error::Protocol("no head statement".into()));
                };
                for s in first {
                    q(s).bind(key).execute(&mut **tx).await?;
                }
                let row = q(last).bind(key).fetch_one(&mut **tx).await?;
                let head = $crate::shared::Head {
                    token: row.try_get(0)?,
                    permits: row.try_get(1)?,
                    intent_until: row.try_get(2)?,
                    now: row.try_get(3)?,
                    first_in_line: row.try_get(4)?,
                };
                q(&sql.purge)
                    .bind(key)
                    .bind(head.now)
                    .execute(&mut **tx)
                    .await?;
                let holders = q(&sql.list)
                    .bind(key)
                    .fetch_all(&mut **tx)
                    .await?
                    .iter()
                    .map(|r| {
                        Ok($crate::shared::HolderRow {
                            owner: r.try_get(0)?,
                            access: r.try_get(1)?,
                            token: r.try_get(2)?,
                            expires_at: r.try_get(3)?,
                        })
                    })
                    .collect::<Result<Vec<_>, sqlx::Error>>()?;
                Ok((head, holders))
            }

            /// Writes `owner` as a holder with the next token (returned), and keeps
            /// `head` and `holders` as the database now has them.
            #[allow(clippy::too_many_arguments)]
            async fn grant_shared(
                tx: &mut sqlx::Transaction<'_, $db>,
                sql: &$crate::shared::SharedSql,
                key: &str,
                head: &mut $crate::shared::Head,
                holders: &mut Vec<$crate::shared::HolderRow>,
                owner: &str,
                access: dlock_core::Access,
                ttl_ms: i64,
            ) -> Result<i64, sqlx::Error> {
                let q = |s: &str| {
                    sqlx::query(sqlx::AssertSqlSafe(s.to_owned())).persistent(sql.persistent)
                };
                // at least the clock in µs: a row pruned and created again starts
                // above its old tokens (see `prune`)
                let token = (head.token + 1).max(head.now.saturating_mul(1000));
                let permits = match access {
                    dlock_core::Access::Permit(n) => i64::from(n),
                    _ => head.permits,
                };
                // a writer that got in no longer needs an intent (old clients')
                let intent = if access == dlock_core::Access::Write {
                    0
                } else {
                    head.intent_until
                };
                q(&sql.grant_head)
                    .bind(token)
                    .bind(permits)
                    .bind(intent)
                    .bind(key)
                    .execute(&mut **tx)
                    .await?;
                let expires_at = head.now + ttl_ms;
                let tag = $crate::shared::tag(access);
                q(&sql.insert_holder)
                    .bind(key)
                    .bind(owner)
                    .bind(tag)
                    .bind(token)
                    .bind(expires_at)
                    .execute(&mut **tx)
                    .await?;
                (head.token, head.permits, head.intent_until) = (token, permits, intent);
                holders.push($crate::shared::HolderRow {
                    owner: owner.to_owned(),
                    access: tag.to_owned(),
                    token,
                    expires_at,
                });
                Ok(token)
            }

            /// Grants the key to the waiters first in line, one after another, while
            /// each fits beside the holders; each hears its own grant.
            async fn grant_in_line(
                tx: &mut sqlx::Transaction<'_, $db>,
                sql: &$crate::shared::SharedSql,
                parts: &$crate::queue::TxParts<$db>,
                key: &str,
                head: &mut $crate::shared::Head,
                holders: &mut Vec<$crate::shared::HolderRow>,
            ) -> Result<(), sqlx::Error> {
                use $crate::shared::{Decision, decide};
                if head.first_in_line.is_none() {
                    return Ok(()); // nobody waited when the head row was locked
                }
                while let Some(next) = parts.head(tx, key, head.now, false).await? {
                    let access = $crate::shared::access_of(&next.access, next.permits);
                    if decide(access, &next.owner, head, holders, false) != Decision::Grant {
                        break;
                    }
                    let token = <$ty>::grant_shared(
                        tx,
                        sql,
                        key,
                        head,
                        holders,
                        &next.owner,
                        access,
                        next.ttl_ms,
                    )
                    .await?;
                    parts.leave_queue(tx, key, &next.owner).await?;
                    parts.tell(tx, &next, token).await?;
                }
                Ok(())
            }

            /// Removes the holder `owner` with `token` and grants what it frees to
            /// the waiters first in line.
            async fn release_shared_once(
                pool: &$pool,
                sql: &$crate::shared::SharedSql,
                parts: &$crate::queue::TxParts<$db>,
                key: &str,
                owner: &str,
                token: i64,
            ) -> Result<$crate::store::Released, sqlx::Error> {
                let mut conn = pool.acquire().await?;
                let mut tx = parts.begin(&mut conn).await?;
                let (mut head, mut holders) = <$ty>::lock_shared(&mut tx, sql, key).await?;
                let deleted = sqlx::query(sqlx::AssertSqlSafe(sql.release.as_str()))
                    .persistent(sql.persistent)
                    .bind(key)
                    .bind(owner)
                    .bind(token)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if deleted != 1 {
                    tx.rollback().await?;
                    return Ok($crate::store::Released::No);
                }
                holders.retain(|h| h.owner != owner);
                <$ty>::grant_in_line(&mut tx, sql, parts, key, &mut head, &mut holders).await?;
                tx.commit().await?;
                // what it freed is granted already
                Ok($crate::store::Released::Yes { queued: false })
            }

            async fn grant_next_shared_once(
                pool: &$pool,
                sql: &$crate::shared::SharedSql,
                parts: &$crate::queue::TxParts<$db>,
                key: &str,
                giving_up: Option<&str>,
            ) -> Result<(), sqlx::Error> {
                let mut conn = pool.acquire().await?;
                let mut tx = parts.begin(&mut conn).await?;
                let (mut head, mut holders) = <$ty>::lock_shared(&mut tx, sql, key).await?;
                if let Some(owner) = giving_up {
                    parts.leave_queue(&mut tx, key, owner).await?;
                    // a grant it never took
                    sqlx::query(sqlx::AssertSqlSafe(sql.give_back.as_str()))
                        .persistent(sql.persistent)
                        .bind(key)
                        .bind(owner)
                        .execute(&mut *tx)
                        .await?;
                    holders.retain(|h| h.owner != owner);
                }
                <$ty>::grant_in_line(&mut tx, sql, parts, key, &mut head, &mut holders).await?;
                tx.commit().await
            }
        }
    };
}
