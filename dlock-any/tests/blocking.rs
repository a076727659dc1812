//! The blocking API on every backend: locks taken from plain threads, renewed in the
//! background past their TTL while the thread sleeps, excluding a second client,
//! handed on with a higher token, and released by a dropped guard.
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::thread;
use std::time::Duration;

use dlock_any::blocking::{self, Backend, Locker};
#[allow(unused_imports)]
use dlock_conformance::required_env;

const TTL: Duration = Duration::from_secs(2);

fn lockers(a: &Backend, b: &Backend) -> (Locker, Locker) {
    let locker = |backend| {
        Locker::new(backend)
            .with_ttl(TTL)
            .with_wait(Duration::from_secs(20))
    };
    (locker(a), locker(b))
}

/// `a` and `b` are two clients of one lock service (two connects, as two processes).
fn holds_renews_and_hands_on(a: &Backend, b: &Backend) {
    let (la, lb) = lockers(a, b);
    let name = format!("blocking/{:016x}", dlock_any::random_u64());
    let guard = la.lock(&name).expect("lock");
    thread::sleep(TTL * 2 + Duration::from_millis(500)); // work longer than the TTL
    assert!(
        guard.is_held(),
        "renewed in the background: {:?}",
        guard.state()
    );
    assert!(
        lb.try_lock(&name).unwrap().is_none(),
        "a second client is excluded"
    );
    assert_eq!(lb.try_with_lock(&name, |_| unreachable!()).unwrap(), None);

    let waiter = {
        let (lb, name) = (lb.clone(), name.clone());
        thread::spawn(move || lb.lock(&name))
    };
    thread::sleep(Duration::from_millis(200));
    let first = guard.token();
    assert!(guard.release().expect("release"));
    let second = waiter
        .join()
        .unwrap()
        .expect("the waiter gets it on release");
    assert!(second.token() > first, "tokens increase across holders");

    drop(second); // released in the background
    let third = la
        .with_lock(&name, |g| {
            assert!(g.is_held());
            g.token()
        })
        .expect("taken after the dropped guard's release");
    assert!(third > first);
    assert!(!guard_is_left(&lb, &name), "with_lock released the name");
}

fn guard_is_left(locker: &Locker, name: &str) -> bool {
    match locker.try_lock(name).unwrap() {
        Some(g) => {
            g.release().unwrap();
            false
        }
        None => true,
    }
}

fn on(url: &str) {
    let a = blocking::connect(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    let b = blocking::connect(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    holds_renews_and_hands_on(&a, &b);
}

#[test]
fn memory() {
    // each memory:// connect is a table of its own: two lockers on one backend
    let backend = blocking::connect("memory://").unwrap();
    holds_renews_and_hands_on(&backend, &backend);
}

#[test]
fn works_from_inside_async_code_without_a_nested_runtime_panic() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let backend = blocking::connect("memory://").unwrap();
        let guard = Locker::new(&backend).lock("blocking/inside").unwrap();
        assert!(guard.release().unwrap());
        drop(backend); // the runtime thread stops without blocking this one
    });
}

#[test]
fn bad_urls_and_names_are_errors() {
    assert!(matches!(
        blocking::connect("nope://x"),
        Err(dlock_any::LockError::Config(_))
    ));
    let backend = blocking::connect("memory://").unwrap();
    assert!(matches!(
        Locker::new(&backend).lock(""),
        Err(dlock_any::LockError::InvalidName { .. })
    ));
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite() {
    let dir = std::env::temp_dir().join("dlock-any-tests");
    std::fs::create_dir_all(&dir).unwrap();
    on(&format!(
        "sqlite://{}/b-{:016x}.db",
        dir.display(),
        dlock_any::random_u64()
    ));
}

#[cfg(all(feature = "postgres", feature = "server-tests"))]
#[test]
fn postgres() {
    on(&required_env("DLOCK_TEST_POSTGRES_URL"));
}

#[cfg(all(feature = "mysql", feature = "server-tests"))]
#[test]
fn mysql() {
    on(&required_env("DLOCK_TEST_MYSQL_URL"));
}

#[cfg(all(feature = "redis", feature = "server-tests"))]
#[test]
fn redis_single_sentinel_and_cluster() {
    on(&required_env("DLOCK_TEST_REDIS_URL"));
    on(&required_env("DLOCK_TEST_REDIS_SENTINEL_URL"));
    on(&required_env("DLOCK_TEST_REDIS_CLUSTER_URL"));
}

#[cfg(all(feature = "redis", feature = "server-tests"))]
#[test]
fn redlock() {
    let hosts: Vec<String> = required_env("DLOCK_TEST_REDLOCK_URLS")
        .split(',')
        .map(|u| u.trim_start_matches("redis://").to_owned())
        .collect();
    // shared test servers, started with the run: no restart delay
    on(&format!("redlock://{}?restart-delay=0s", hosts.join(",")));
}

#[cfg(all(feature = "etcd", feature = "server-tests"))]
#[test]
fn etcd() {
    let endpoints = required_env("DLOCK_TEST_ETCD_ENDPOINTS").replace("http://", "");
    on(&format!("etcd://{endpoints}"));
}

#[cfg(all(feature = "zookeeper", feature = "server-tests"))]
#[test]
fn zookeeper() {
    on(&format!("zk://{}", required_env("DLOCK_TEST_ZK_ADDR")));
}
