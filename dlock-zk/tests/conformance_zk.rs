//! The conformance suite on a standalone ZooKeeper server.

mod common;

async fn harness() -> common::Zk {
    common::Zk(common::single())
}

dlock_conformance::conformance_suite!(harness);
