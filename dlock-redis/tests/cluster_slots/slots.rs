//! Locks whose keys span slots or whose slot moves: awkward names that keep every key
//! in one slot, renewals spanning slots, a slot migrated under a held lock.

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{acquiring, guarded, take, unique_name};
use dlock_core::{DistributedLock, GuardState, LockGuard, LockName, random_u64};
use redis::Value;

use super::nodes::{cmd, masters, owns, seeds};
use crate::common;

/// In the plain layout (the SET NX family's lock key, dlock's counter beside it) a name
/// holding a `}` but no hash tag of its own: its counter and channel still hash to the
/// lock key's slot, so acquire, inspect and release work on a cluster (they failed
/// with `CROSSSLOT`); so do fenced writes to such a key.
pub(crate) async fn awkward_names_keep_every_key_in_one_slot() {
    let url = format!("{}?layout=plain", common::cluster_url());
    let lock = common::redis(&url).await;
    let ttl = Duration::from_secs(5);
    for shape in ["a}b", "x{}y{z}", "{}", "}"] {
        let n = LockName::new(&format!("{shape}/{:016x}", random_u64())).unwrap();
        let lease = lock
            .try_acquire(&n, ttl)
            .await
            .unwrap_or_else(|e| panic!("{shape}: {e:?}"))
            .expect("free");
        let info = lock.inspect(&n).await.unwrap().expect("held");
        assert_eq!(info.token, lease.token(), "{shape}");
        assert!(lock.release(&lease).await.unwrap(), "{shape}");
        let key = format!("stock:{shape}:{:016x}", random_u64());
        let fence = lock.fence();
        fence
            .set(&key, "10", lease.token())
            .await
            .unwrap_or_else(|e| panic!("{shape}: {e:?}"));
        assert_eq!(
            fence.get(&key, lease.token()).await.unwrap().as_deref(),
            Some("10")
        );
    }
}

/// Forty locks on names spread over the slots of all three masters, renewed for three
/// TTLs: each tick's renewals go out as one script call per slot (one call across
/// slots would be refused with `CROSSSLOT` and every lock lost).
pub(crate) async fn renewals_spanning_slots_keep_every_lock() {
    let url = common::cluster_url();
    let lock = common::redis_dyn(&url).await;
    let ttl = Duration::from_secs(1);
    let mut guards = Vec::new();
    for i in 0..40 {
        let n = LockName::new(&format!("cluster/many/{i}/{:016x}", random_u64())).unwrap();
        let lease = take(&lock, &n, ttl).await;
        guards.push(LockGuard::new(Arc::clone(&lock), lease));
    }
    tokio::time::sleep(ttl * 3).await;
    for g in &guards {
        assert_eq!(g.state(), GuardState::Held, "{:?}", g.lease().name());
    }
    for g in guards {
        g.release().await.unwrap();
    }
}

/// The slot of a held lock moves to another master: while it is `MIGRATING` (keys
/// still on the source), after its keys moved (the source answers `ASK`), and once
/// the target owns it (`MOVED`), the holder keeps renewing, nobody else gets the lock,
/// and the next holder's token is higher.
pub(crate) async fn a_slot_migrated_under_a_held_lock() {
    let url = common::cluster_url();
    let lock = common::redis_dyn(&url).await;
    let other = common::redis_dyn(&url).await;
    let name = unique_name("cluster/migrating");
    let ttl = Duration::from_secs(1);
    let guard = guarded(&lock, &name, ttl).await;
    let token = guard.token();

    // a waiter, subscribed to the lock's channel (sharded) through the migration: when
    // the slot moves the server ends that subscription unasked, which must neither
    // lose the waiter nor reach another request as its answer
    let waiter = common::redis_dyn(&url).await;
    let waiting = acquiring(&waiter, &name, ttl, Duration::from_secs(60));

    let key = format!("dlock:{{{}}}:lock", name.as_str());
    let slot: u16 = cmd(&seeds()[0], &["CLUSTER", "KEYSLOT", &key]).await;
    let all = masters().await;
    let source = all
        .iter()
        .find(|m| owns(m, slot))
        .expect("an owner")
        .clone();
    let target = all
        .iter()
        .find(|m| m.id != source.id)
        .expect("another")
        .clone();
    let s = slot.to_string();

    let still_held = |phase: &'static str| {
        let (guard, other, name) = (&guard, &other, &name);
        async move {
            tokio::time::sleep(ttl * 2).await;
            assert_eq!(
                guard.state(),
                GuardState::Held,
                "{phase}: the holder lost it"
            );
            let info = other.inspect(name).await.unwrap().expect("held");
            assert_eq!(info.token, token, "{phase}");
            assert!(
                other.try_acquire(name, ttl).await.unwrap().is_none(),
                "{phase}: a second holder got it"
            );
        }
    };

    let _: Value = cmd(
        &target.addr,
        &["CLUSTER", "SETSLOT", &s, "IMPORTING", &source.id],
    )
    .await;
    let _: Value = cmd(
        &source.addr,
        &["CLUSTER", "SETSLOT", &s, "MIGRATING", &target.id],
    )
    .await;
    still_held("slot migrating, keys on the source").await;

    // every key of the slot moves, as redis-cli --cluster reshard moves them
    let keys: Vec<String> = cmd(&source.addr, &["CLUSTER", "GETKEYSINSLOT", &s, "100000"]).await;
    assert!(keys.contains(&key), "{keys:?}");
    let (host, port) = target.addr.rsplit_once(':').unwrap();
    let mut migrate = vec!["MIGRATE", host, port, "", "0", "5000", "KEYS"];
    migrate.extend(keys.iter().map(String::as_str));
    let _: Value = cmd(&source.addr, &migrate).await;
    still_held("keys on the target, the source answering ASK").await;

    for m in &all {
        let _: Value = cmd(&m.addr, &["CLUSTER", "SETSLOT", &s, "NODE", &target.id]).await;
    }
    still_held("slot owned by the target (MOVED)").await;

    guard.release().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter got the lock")
        .unwrap()
        .unwrap();
    assert!(next.token() > token, "{} after {token}", next.token());
    waiter.release(&next).await.unwrap();
}
