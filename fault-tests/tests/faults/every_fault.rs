//! The whole suite ([`run_all`]) on each backend: the shared servers, and the private
//! ensemble and etcd cluster that can cut a server off from its peers.

use dlock_faults::backends::Backend;

use super::suite::{faults, run_all};

faults_on! { faults =>
    sqlite: "sqlite", None;
    postgres: "postgres", Some("DLOCK_TEST_POSTGRES_URL");
    mariadb: "mariadb", Some("DLOCK_TEST_MYSQL_URL");
    redis: "redis", Some("DLOCK_TEST_REDIS_URL");
    redlock: "redlock×5", Some("DLOCK_TEST_REDLOCK_URLS");
    etcd: "etcd", Some("DLOCK_TEST_ETCD_ENDPOINTS");
    etcd_cluster: "etcd×3", Some("DLOCK_TEST_ETCD_CLUSTER_ENDPOINTS");
    zookeeper: "zookeeper", Some("DLOCK_TEST_ZK_ADDR");
    zookeeper_ensemble: "zookeeper×3", Some("DLOCK_TEST_ZK_CLUSTER_ADDR");
}

/// A private ensemble: a server cut off from its peers while its clients reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_server_partition() {
    // its servers are its own: nothing to take
    let dir = scratch("ensemble");
    run_all(Backend::partitionable_zookeeper(&dir).await).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A private etcd cluster: a member cut off from its peers while its clients reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_server_partition() {
    // its servers are its own: nothing to take
    let dir = scratch("etcd");
    run_all(Backend::partitionable_etcd(&dir).await).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A new directory name for a private cluster's servers.
fn scratch(what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "dlock-faults-{what}-{:016x}",
        dlock_any::random_u64()
    ))
}
