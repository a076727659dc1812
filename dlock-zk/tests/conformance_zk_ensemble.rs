//! The conformance suite on a 3-node ZooKeeper ensemble.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::Zk {
    common::Zk(common::ensemble(), dlock_zk::NodeLayout::Dlock)
}

dlock_conformance::conformance_suite!(harness);
