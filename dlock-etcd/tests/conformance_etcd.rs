//! The conformance suite on a single etcd member.

mod common;

async fn harness() -> common::Etcd {
    common::Etcd(common::single())
}

dlock_conformance::conformance_suite!(harness);
