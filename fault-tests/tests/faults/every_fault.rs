//! The whole suite ([`run_all`]) on each backend: the shared servers, and the private
//! ensemble and etcd cluster that can cut a server off from its peers.

use dlock_faults::backends::Backend;

use super::suite::{faults, run_all};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    faults("sqlite", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    faults("postgres", Some("DLOCK_TEST_POSTGRES_URL")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb() {
    faults("mariadb", Some("DLOCK_TEST_MYSQL_URL")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis() {
    faults("redis", Some("DLOCK_TEST_REDIS_URL")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock() {
    faults("redlock×5", Some("DLOCK_TEST_REDLOCK_URLS")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd() {
    faults("etcd", Some("DLOCK_TEST_ETCD_ENDPOINTS")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_cluster() {
    faults("etcd×3", Some("DLOCK_TEST_ETCD_CLUSTER_ENDPOINTS")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper() {
    faults("zookeeper", Some("DLOCK_TEST_ZK_ADDR")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_ensemble() {
    faults("zookeeper×3", Some("DLOCK_TEST_ZK_CLUSTER_ADDR")).await;
}

/// A private ensemble: a server cut off from its peers while its clients reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_server_partition() {
    // its servers are its own: nothing to take
    let dir = std::env::temp_dir().join(format!(
        "dlock-faults-ensemble-{:016x}",
        dlock_any::random_u64()
    ));
    run_all(Backend::partitionable_zookeeper(&dir).await).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A private etcd cluster: a member cut off from its peers while its clients reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_server_partition() {
    // its servers are its own: nothing to take
    let dir = std::env::temp_dir().join(format!(
        "dlock-faults-etcd-{:016x}",
        dlock_any::random_u64()
    ));
    run_all(Backend::partitionable_etcd(&dir).await).await;
    let _ = std::fs::remove_dir_all(&dir);
}
