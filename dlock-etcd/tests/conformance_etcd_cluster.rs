//! The conformance suite on a 3-member etcd cluster, every client given all members.

mod common;

async fn harness() -> common::Etcd {
    common::Etcd(common::cluster())
}

dlock_conformance::conformance_suite!(harness);
