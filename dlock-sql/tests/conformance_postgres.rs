//! The conformance suite on postgres.

mod common;

async fn harness() -> common::SqlHarness {
    common::SqlHarness {
        url: common::postgres_url(),
    }
}

dlock_conformance::conformance_suite!(harness);
