//! `dlock leader --watch` follows a leader's proclaimed value (a library leader's
//! `Leadership::proclaim`): a new value with the same epoch, on every backend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod common;
use common::{unique, wait_exit, watch_leader};

fn leader_watch_sees_a_proclaimed_value(url: &str) {
    let name = unique("proclaim");
    let (mut watcher, rx) = watch_leader(url, &name);
    let next = || -> serde_json::Value {
        let line = rx
            .recv_timeout(Duration::from_secs(15))
            .expect("a line from the watcher");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
    };
    assert!(next()["leader"].is_null());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let lock = dlock_any::connect(url).await.unwrap();
        let election = dlock_any::Election::new(lock, name.as_str()).unwrap();
        let mut leadership = election.campaign("10.0.0.1:80").await.unwrap();
        let epoch = leadership.epoch().get();
        let seen = tokio::task::block_in_place(next);
        assert_eq!(seen["leader"]["value"], "10.0.0.1:80", "{seen}");
        assert_eq!(seen["leader"]["epoch"].as_u64(), Some(epoch), "{seen}");
        leadership.proclaim("10.0.0.2:80").await.unwrap();
        let seen = tokio::task::block_in_place(next);
        assert_eq!(seen["leader"]["value"], "10.0.0.2:80", "{seen}");
        assert_eq!(
            seen["leader"]["epoch"].as_u64(),
            Some(epoch),
            "the same leadership: {seen}"
        );
        assert!(leadership.resign().await.unwrap());
    });
    assert!(next()["leader"].is_null(), "vacant after the resign");
    kill(
        Pid::from_raw(i32::try_from(watcher.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(wait_exit(&mut watcher, Duration::from_secs(10)), 0);
}

common::every_backend!(leader_watch_sees_a_proclaimed_value);
