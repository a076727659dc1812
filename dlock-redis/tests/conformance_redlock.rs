//! The conformance suite on Redlock over five Redis servers.

mod common;

async fn harness() -> common::Quorum {
    common::Quorum(common::redlock_urls())
}

dlock_conformance::conformance_suite!(harness);
