//! The conformance suite on mysql.

mod common;

async fn harness() -> common::SqlHarness {
    common::SqlHarness {
        url: common::mysql_url(),
    }
}

dlock_conformance::conformance_suite!(harness);
