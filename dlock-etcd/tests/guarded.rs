//! A transaction guarded by the lease commits while the lease holds, and writes nothing
//! once it is gone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_conformance::{take, unique_name};
use dlock_core::{DistributedLock, LockError, random_u64};
use dlock_etcd::etcd_client::{Client, TxnOp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_txn_commits_only_while_the_lease_holds() {
    let endpoints = common::single();
    let lock = common::etcd(&endpoints).await;
    let name = unique_name("guarded");
    let key = format!("guarded-test/{:016x}", random_u64());
    let lease = take(&lock, &name, Duration::from_secs(5)).await;
    lock.guarded_txn(&lease, vec![TxnOp::put(key.clone(), "held", None)])
        .await
        .unwrap();
    assert!(lock.release(&lease).await.unwrap());
    let late = lock
        .guarded_txn(&lease, vec![TxnOp::put(key.clone(), "stale", None)])
        .await;
    assert!(matches!(late, Err(LockError::LeaseLost { .. })), "{late:?}");
    // a later holder's lease does not make the old one pass
    let next = take(&lock, &name, Duration::from_secs(5)).await;
    let late = lock
        .guarded_txn(&lease, vec![TxnOp::put(key.clone(), "stale", None)])
        .await;
    assert!(matches!(late, Err(LockError::LeaseLost { .. })), "{late:?}");
    let mut client = Client::connect(
        endpoints
            .iter()
            .map(|e| e.replace("http://", ""))
            .collect::<Vec<_>>(),
        None,
    )
    .await
    .unwrap();
    let got = client.get(key, None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"held");
    assert!(lock.release(&next).await.unwrap());
}
