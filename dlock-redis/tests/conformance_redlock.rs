//! The conformance suite on Redlock over five Redis servers (which answers
//! `Unsupported` for semaphores and read-write locks: the shared cases check that).
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::Quorum {
    common::Quorum(common::redlock_urls())
}

dlock_conformance::conformance_suite!(harness);
