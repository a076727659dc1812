//! The conformance suite on a standalone ZooKeeper server with the mutex's nodes named
//! the Curator way (`layout=curator`): the layout changes names, not guarantees.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::Zk {
    common::Zk(common::single(), dlock_zk::NodeLayout::Curator)
}

dlock_conformance::conformance_suite!(harness);
