//! The conformance suite on sqlite.

mod common;

async fn harness() -> common::SqlHarness {
    common::SqlHarness {
        url: common::sqlite_url(),
    }
}

dlock_conformance::conformance_suite!(harness);
