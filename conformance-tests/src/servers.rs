//! Faults on the real test servers and on clients' network paths.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{FaultProxy, Link, required_env};

/// Runs `scripts/services ctl $DLOCK_SVC_DIR ACTION NAMES...` (kill, stop, start,
/// restart, pause, resume) on the servers `scripts/services up` started.
///
/// # Panics
/// When `DLOCK_SVC_DIR` is unset or the action fails: a fault test must not pass
/// without its fault.
pub async fn services_ctl(action: &str, names: &[&str]) {
    let dir = required_env("DLOCK_SVC_DIR");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services");
    let mut cmd = tokio::process::Command::new(script);
    cmd.arg("ctl").arg(dir).arg(action).args(names);
    let status = cmd.status().await;
    assert!(
        status.as_ref().is_ok_and(std::process::ExitStatus::success),
        "scripts/services ctl {action} {names:?} failed: {status:?}"
    );
}

/// Proxies in front of each of several servers, cut and healed together.
pub struct ProxyGroup(pub Vec<Arc<FaultProxy>>);

impl ProxyGroup {
    /// One proxy per `host:port`; returns the proxies' addresses in the same order.
    ///
    /// # Panics
    /// When a loopback port cannot be bound.
    pub async fn start(hosts: &[&str]) -> (Vec<String>, Self) {
        let mut addrs = Vec::new();
        let mut proxies = Vec::new();
        for h in hosts {
            let p = Arc::new(FaultProxy::start(h).await.expect("bind a loopback port"));
            addrs.push(p.addr().to_string());
            proxies.push(p);
        }
        (addrs, Self(proxies))
    }

    /// Sets every proxy's mode.
    pub fn set_mode(&self, mode: crate::FaultMode) {
        for p in &self.0 {
            p.set_mode(mode);
        }
    }
}

#[async_trait]
impl Link for ProxyGroup {
    async fn cut(&self) {
        self.set_mode(crate::FaultMode::Blackhole);
    }
    async fn heal(&self) {
        self.set_mode(crate::FaultMode::Pass);
    }
}
