//! The conformance suite on one Redis server with the plain key layout (the lock key is
//! the prefix plus the name, as the `SET NX` family names it): the layout changes
//! names, not guarantees.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::Single {
    common::Single(format!(
        "{}?layout=plain&prefix=plain:",
        common::redis_url()
    ))
}

dlock_conformance::conformance_suite!(harness);
