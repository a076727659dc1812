//! Idempotency records on Redis: [`RedisResults`], the [`ResultStore`] of
//! [`dlock_core::Idempotent`] on the lock's own server.
//!
//! One hash per request id, `PREFIXresult:{id}`, with the highest token that began or
//! recorded (the runner's fence) and the result; it expires `retain` after the last
//! begin or record. Each operation is one script, so the fence check and the write are
//! one step on the server.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::millis_u64;
use dlock_core::{FencingToken, LockError, ResultStore};
use redis::Script;

use crate::RedisLock;
use crate::key_space::KeySpace;
use crate::keys::escape;

/// KEYS: record. ARGV: token, retain ms. Raises the token unless a higher one holds
/// it; `{1, token}` or `{0, higher}`.
static BEGIN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local cur = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
local t = tonumber(ARGV[1])
if t < cur then return {0, cur} end
redis.call('HSET', KEYS[1], 'token', ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return {1, t}
",
    )
});

/// KEYS: record. ARGV: token, result, retain ms. Records the result unless a higher
/// token holds the request.
static RECORD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local cur = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
local t = tonumber(ARGV[1])
if t < cur then return {0, cur} end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'result', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, t}
",
    )
});

/// The lock's server as a [`ResultStore`]: one hash per request id (`PREFIXresult:{id}`),
/// its token and result, written by scripts that compare the token first.
#[derive(Clone, Debug)]
pub struct RedisResults {
    at: KeySpace,
}

impl RedisLock {
    /// Idempotency records on this lock's server.
    #[must_use]
    pub fn results(&self) -> RedisResults {
        RedisResults {
            at: self.key_space(),
        }
    }
}

impl RedisResults {
    fn key(&self, request: &str) -> String {
        format!("{}result:{{{}}}", self.at.prefix, escape(request))
    }
}

fn judge(request: &str, token: FencingToken, (ok, n): (i64, i64)) -> Result<(), LockError> {
    if ok == 1 {
        Ok(())
    } else {
        Err(LockError::stale_token(
            request,
            u64::try_from(n).ok(),
            token,
        ))
    }
}

#[async_trait]
impl ResultStore for RedisResults {
    async fn begin(
        &self,
        request: &str,
        token: FencingToken,
        retain: Duration,
    ) -> Result<(), LockError> {
        dlock_core::require_real_token(request, token)?;
        let mut call = BEGIN.prepare_invoke();
        call.key(self.key(request))
            .arg(token.get())
            .arg(millis_u64(retain).max(1));
        judge(
            request,
            token,
            self.at.node.invoke("begin request", call).await?,
        )
    }

    async fn record(
        &self,
        request: &str,
        token: FencingToken,
        result: &[u8],
        retain: Duration,
    ) -> Result<(), LockError> {
        dlock_core::require_real_token(request, token)?;
        let mut call = RECORD.prepare_invoke();
        call.key(self.key(request))
            .arg(token.get())
            .arg(result)
            .arg(millis_u64(retain).max(1));
        judge(
            request,
            token,
            self.at.node.invoke("record result", call).await?,
        )
    }

    async fn result(&self, request: &str) -> Result<Option<Vec<u8>>, LockError> {
        let key = self.key(request);
        let mut conn = self.at.node.conn.clone();
        self.at
            .node
            .run("read result", async move {
                redis::cmd("HGET")
                    .arg(key)
                    .arg("result")
                    .query_async::<Option<Vec<u8>>>(&mut conn)
                    .await
            })
            .await
    }
}
