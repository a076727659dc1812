//! Every URL form in the table connects; malformed ones say what is wrong.
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_any::{LockError, LockName, connect};
use dlock_conformance::{required_env, take_and_release};

async fn works(url: &str, backend: &str) {
    let lock = connect(url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    assert_eq!(lock.backend_name(), backend);
    let name = LockName::new(&format!("facade/{}", dlock_any::random_u64())).unwrap();
    take_and_release(&lock, &name, Duration::from_secs(5)).await;
}

fn sqlite_path() -> String {
    let dir = std::env::temp_dir().join("dlock-any-tests");
    std::fs::create_dir_all(&dir).unwrap();
    format!("{}/c-{:016x}.db", dir.display(), dlock_any::random_u64())
}

#[tokio::test]
async fn memory_url() {
    works("memory://", "memory").await;
}

#[tokio::test]
async fn sqlite_urls() {
    works(&format!("sqlite://{}", sqlite_path()), "sqlite").await;
    // `sqlite:/abs` (one slash) is refused as ambiguous, with both spellings named
    let one_slash = format!("sqlite:{}", sqlite_path());
    match connect(&one_slash).await {
        Err(LockError::Config(msg)) => {
            assert!(msg.contains("sqlite:///"), "{msg}");
        }
        other => panic!("{one_slash}: {:?}", other.map(|_| "connected")),
    }
    works(
        &format!("sqlite://{}?table=other_locks&op_timeout=2s", sqlite_path()),
        "sqlite",
    )
    .await;
}

#[cfg(all(feature = "postgres", feature = "server-tests"))]
#[tokio::test]
async fn postgres_urls() {
    let url = required_env("DLOCK_TEST_POSTGRES_URL");
    works(&url, "postgres").await;
    works(&url.replacen("postgres://", "postgresql://", 1), "postgres").await;
}

#[cfg(all(feature = "mysql", feature = "server-tests"))]
#[tokio::test]
async fn mysql_and_mariadb_urls() {
    let url = required_env("DLOCK_TEST_MYSQL_URL");
    works(&url, "mysql").await;
    works(&url.replacen("mysql://", "mariadb://", 1), "mysql").await;
}

#[tokio::test]
async fn malformed_urls_are_config_errors_that_say_why() {
    for (url, says) in [
        ("", "no scheme"),
        ("locks.db", "no scheme"),
        ("ftp://u:secret@host/x", "unknown scheme"),
        ("sqlite:///tmp/x.db?table=bad-name", "table name"),
        (
            "postgres://u:secret@127.0.0.1:1/db?pool_size=-1",
            "pool_size",
        ),
        (
            "postgres://u:secret@127.0.0.1:1/db?op_timout=2s",
            "unknown parameter",
        ),
        ("sqlite:///tmp/x.db?pool=2", "unknown parameter"),
    ] {
        let err = connect(url).await.map(|_| ()).unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{url}: {err:?}");
        let msg = err.to_string();
        assert!(msg.contains(says), "{url}: {msg}");
        assert!(!msg.contains("secret"), "{url}: {msg}");
    }
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn unreachable_server_is_unavailable() {
    let err = connect("postgres://u:secret@127.0.0.1:1/db?op_timeout=1s")
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err:?}");
    assert!(!format!("{err:?}").contains("secret"));
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn bad_sql_options_are_config_errors() {
    let err = connect("postgres://u:secret@127.0.0.1:1/db?pool_size=-1")
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(err, LockError::Config(_)) && err.to_string().contains("pool_size"),
        "{err}"
    );
}

#[cfg(not(feature = "postgres"))]
#[tokio::test]
async fn a_disabled_backend_names_its_feature() {
    let e = connect("postgres://u:secret@h/db")
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, LockError::Config(_)), "{e:?}");
    assert!(
        e.to_string().contains("feature `postgres`") && !e.to_string().contains("secret"),
        "{e}"
    );
}

#[cfg(all(feature = "redis", feature = "server-tests"))]
#[tokio::test]
async fn redis_and_redlock_urls() {
    let url = required_env("DLOCK_TEST_REDIS_URL");
    works(&url, "redis").await;
    works(&format!("{url}?prefix=other:&timeout=1s"), "redis").await;
    let hosts: Vec<String> = required_env("DLOCK_TEST_REDLOCK_URLS")
        .split(',')
        .map(|u| u.trim_start_matches("redis://").to_owned())
        .collect();
    // shared test servers, started with the run: no restart delay
    works(
        &format!("redlock://{}?restart-delay=0s", hosts.join(",")),
        "redlock",
    )
    .await;
    let sentinels = required_env("DLOCK_TEST_REDIS_SENTINEL_URL");
    works(&sentinels, "redis").await;
    works(&format!("{sentinels}?prefix=other:"), "redis").await;
    works(&required_env("DLOCK_TEST_REDIS_CLUSTER_URL"), "redis").await;
}

/// Asserts that each URL is refused with a `Config` error that does not show its
/// password (`secret`).
#[cfg(any(feature = "redis", feature = "etcd", feature = "zookeeper"))]
async fn refused(urls: &[&str]) {
    for url in urls {
        let e = connect(url).await.map(|_| ()).unwrap_err();
        assert!(matches!(e, LockError::Config(_)), "{url}: {e:?}");
        assert!(
            !e.to_string().contains("secret") && !format!("{e:?}").contains("secret"),
            "{e:?}"
        );
    }
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn malformed_redis_urls_are_config_errors() {
    refused(&[
        "redlock://",
        "redis://h:1?prefix={x}",
        "redis://:secret@h:1?timeout=later",
        "redis://:secret@h:1?timout=2s",
        "redlock://:secret@a:1,b:2,c:3?pool_size=3",
        "redis-sentinel://:secret@a:1,b:2",
        "redis-cluster://:secret@a:1/2",
        "redis-sentinel://:secret@a:1/master/x",
        "redis-sentinel://:secret@a:1/master?timout=2s",
    ])
    .await;
}

#[cfg(all(feature = "etcd", feature = "server-tests"))]
#[tokio::test]
async fn etcd_urls() {
    let single = required_env("DLOCK_TEST_ETCD_ENDPOINTS").replace("http://", "");
    works(&format!("etcd://{single}"), "etcd").await;
    works(&format!("etcd://{single}?prefix=other/&timeout=2s"), "etcd").await;
    let cluster = required_env("DLOCK_TEST_ETCD_CLUSTER_ENDPOINTS").replace("http://", "");
    works(&format!("etcd://{cluster}"), "etcd").await;
    refused(&[
        "etcd://",
        "etcd://h:1?colour=red",
        "etcd://u:secret@h:1?timeout=later",
    ])
    .await;
}

#[cfg(all(feature = "zookeeper", feature = "server-tests"))]
#[tokio::test]
async fn zookeeper_urls() {
    let single = required_env("DLOCK_TEST_ZK_ADDR");
    works(&format!("zk://{single}"), "zookeeper").await;
    works(
        &format!("zookeeper://{single}/facade-chroot?session_timeout=2s&timeout=2s&root=/locks"),
        "zookeeper",
    )
    .await;
    works(
        &format!("zk://{}", required_env("DLOCK_TEST_ZK_CLUSTER_ADDR")),
        "zookeeper",
    )
    .await;
    refused(&[
        "zk://",
        "zk:///chroot",
        "zk://h:1?flavour=x",
        "zk://u:secret@h:1?timeout=later",
    ])
    .await;
}
