//! A multi guarded by the lease's node commits while the lease holds, and writes
//! nothing once it is gone.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_conformance::{take, unique_name};
use dlock_core::{DistributedLock, LockError, random_u64};
use dlock_zk::zookeeper_client as zk;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_multi_commits_only_while_the_lease_holds() {
    let addr = common::single();
    let lock = common::zk(&addr).await;
    let name = unique_name("guarded");
    let client = zk::Client::connect(&addr).await.unwrap();
    let path = format!("/guarded-test-{:016x}", random_u64());
    client
        .create(
            &path,
            b"none",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let lease = take(&lock, &name, Duration::from_secs(5)).await;
    lock.guarded_multi(&lease, |w| w.add_set_data(&path, b"held", None))
        .await
        .unwrap();
    assert!(lock.release(&lease).await.unwrap());
    let late = lock
        .guarded_multi(&lease, |w| w.add_set_data(&path, b"stale", None))
        .await;
    assert!(matches!(late, Err(LockError::LeaseLost { .. })), "{late:?}");
    let (data, _) = client.get_data(&path).await.unwrap();
    assert_eq!(data, b"held");
    client.delete(&path, None).await.unwrap();
}
