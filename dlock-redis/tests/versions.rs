//! The conformance suite on the Redis-compatible servers in the field beside Debian's
//! Redis 7.0 — Valkey 8.1 and Redis 6.2, from the PyPI wheels `scripts/services` pins —
//! on one server (semaphores and read-write locks included) and as a Redlock of three.
#![cfg(feature = "server-tests")]

mod common;

use dlock_conformance::required_env;

fn urls(var: &str) -> Vec<String> {
    required_env(var).split(',').map(str::to_owned).collect()
}

mod valkey_8_1 {
    use super::*;

    async fn harness() -> common::Single {
        common::Single(required_env("DLOCK_TEST_VALKEY_URL"))
    }
    dlock_conformance::conformance_suite!(harness);
    dlock_conformance::shared_as_mutex_suite!(harness);

    mod redlock {
        use super::*;

        async fn harness() -> common::Quorum {
            common::Quorum(urls("DLOCK_TEST_VALKEY_REDLOCK_URLS"))
        }
        dlock_conformance::conformance_suite!(harness);
    }
}

mod redis_6_2 {
    use super::*;

    async fn harness() -> common::Single {
        common::Single(required_env("DLOCK_TEST_REDIS62_URL"))
    }
    dlock_conformance::conformance_suite!(harness);
    dlock_conformance::shared_as_mutex_suite!(harness);

    mod redlock {
        use super::*;

        async fn harness() -> common::Quorum {
            common::Quorum(urls("DLOCK_TEST_REDIS62_REDLOCK_URLS"))
        }
        dlock_conformance::conformance_suite!(harness);
    }
}

/// `doctor` names the server as what it is: Valkey by its own version.
#[tokio::test]
async fn doctor_names_each_server_and_version() {
    use dlock_core::DistributedLock as _;
    for (var, expected) in [
        ("DLOCK_TEST_VALKEY_URL", "Valkey 8.1."),
        ("DLOCK_TEST_REDIS62_URL", "Redis 6.2."),
    ] {
        let findings = common::redis(&required_env(var)).await.diagnose().await;
        let findings = findings.expect("diagnose");
        let version = findings
            .iter()
            .find(|f| f.check == "server version")
            .map(|f| f.found.clone())
            .unwrap_or_default();
        assert!(version.starts_with(expected), "{var}: {version}");
    }
}
