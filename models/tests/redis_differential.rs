//! The Redis token model held to the real scripts: 10 000 random operations — takes by
//! three clients, releases, expiries, restores of an older counter, counters lost —
//! run on a Redis server through `RedisLock` and on the model's server side by side;
//! every answer and every counter must agree (a token within what the server's clock
//! allowed between the two `TIME` readings around the call).
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_core::{DistributedLock, Lease, LockName, random_u64};
use dlock_models::redis_tokens::next_token;
use dlock_redis::RedisLock;

/// A small deterministic generator (xorshift), so a failing sequence can be replayed
/// from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

async fn server_micros(c: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(c).await.unwrap();
    s * 1_000_000 + us
}

async fn counter(c: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<u64> {
    redis::cmd("GET").arg(key).query_async(c).await.unwrap()
}

#[tokio::test]
async fn the_scripts_agree_with_the_model_over_ten_thousand_operations() {
    let url = dlock_conformance::required_env("DLOCK_TEST_REDIS_URL");
    let lock = RedisLock::connect(&url).await.unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut raw = client.get_multiplexed_async_connection().await.unwrap();
    let seed = random_u64() | 1;
    let mut rng = Rng(seed);
    let name = LockName::new(&format!("models/differential/{seed:016x}")).unwrap();
    let (lock_key, fence_key) = (
        format!("dlock:{{{name}}}:lock"),
        format!("dlock:{{{name}}}:fence"),
    );
    // the model's server: who holds (a client's slot), and the counter
    let mut held: Option<usize> = None;
    let mut model_counter: Option<u64> = None;
    let mut leases: [Option<Lease>; 3] = [None, None, None];
    let mut seen_counters: Vec<u64> = Vec::new();
    let ttl = Duration::from_secs(30);
    for step in 0..10_000 {
        let at = format!("seed {seed:#x}, step {step}");
        match rng.below(10) {
            // a take by one of three clients
            0..=4 => {
                let c = usize::try_from(rng.below(3)).unwrap();
                let before = server_micros(&mut raw).await;
                let got = lock.try_acquire(&name, ttl).await.unwrap();
                let after = server_micros(&mut raw).await;
                match (held, got) {
                    (Some(_), None) => {}
                    (None, Some(lease)) => {
                        let t = lease.token().get();
                        let (low, high) = (
                            next_token(model_counter, before),
                            next_token(model_counter, after),
                        );
                        assert!(
                            (low..=high).contains(&t),
                            "{at}: token {t}, the model allows {low}..={high}"
                        );
                        model_counter = Some(t);
                        seen_counters.push(t);
                        held = Some(c);
                        leases[c] = Some(lease);
                    }
                    (h, g) => {
                        panic!("{at}: the model says held by {h:?}, the server granted {g:?}")
                    }
                }
            }
            // the holder (or another client) releases its lease
            5 | 6 => {
                let c = usize::try_from(rng.below(3)).unwrap();
                if let Some(lease) = leases[c].take() {
                    let released = lock.release(&lease).await.unwrap();
                    assert_eq!(released, held == Some(c), "{at}: release");
                    if held == Some(c) {
                        held = None;
                    }
                }
            }
            // the lock key expires (PX ran out)
            7 => {
                let _: i64 = redis::cmd("DEL")
                    .arg(&lock_key)
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                held = None;
            }
            // a restore from an older snapshot brings the counter back
            8 => {
                if !seen_counters.is_empty() {
                    let i = usize::try_from(rng.below(seen_counters.len() as u64)).unwrap();
                    let old = seen_counters[i];
                    let _: () = redis::cmd("SET")
                        .arg(&fence_key)
                        .arg(old)
                        .query_async(&mut raw)
                        .await
                        .unwrap();
                    model_counter = Some(old);
                }
            }
            // a restart without persistence loses everything
            _ => {
                let _: i64 = redis::cmd("DEL")
                    .arg(&lock_key)
                    .arg(&fence_key)
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                held = None;
                model_counter = None;
            }
        }
        assert_eq!(
            counter(&mut raw, &fence_key).await,
            model_counter,
            "{at}: the counter"
        );
    }
    let _: i64 = redis::cmd("DEL")
        .arg(&lock_key)
        .arg(&fence_key)
        .query_async(&mut raw)
        .await
        .unwrap();
}
