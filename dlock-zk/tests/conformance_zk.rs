//! The conformance suite on a standalone ZooKeeper server, semaphores and read-write
//! locks included.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::Zk {
    common::Zk(common::single(), dlock_zk::NodeLayout::Dlock)
}

dlock_conformance::conformance_suite!(harness);

// its semaphores and read-write locks, each exclusive side as a mutex
dlock_conformance::shared_as_mutex_suite!(harness);
