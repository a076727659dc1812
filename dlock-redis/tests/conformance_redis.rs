//! The conformance suite on one Redis server.

mod common;

async fn harness() -> common::Single {
    common::Single(common::redis_url())
}

dlock_conformance::conformance_suite!(harness);
