//! The faked clocks of the clock faults: set up, stepped mid-update, put back.

use std::time::Duration;

use super::Plan;
use super::victims::{mid_update, wait_for};
use crate::backends::Backend;
use crate::clock::FakeClock;
use crate::nemesis::{Nemesis, services, services_with};
use crate::store::FencedStore;

/// Whether the `scripts/services` server `name` runs with `clock`'s library loaded.
pub(super) fn preloaded(name: &str, clock: Option<&FakeClock>) -> bool {
    let (Some(clock), Ok(dir)) = (clock, std::env::var("DLOCK_SVC_DIR")) else {
        return false;
    };
    let pid = std::fs::read_to_string(format!("{dir}/pids/{name}.pid")).unwrap_or_default();
    let pid = pid.split_whitespace().next().unwrap_or_default();
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.contains(&clock.library().display().to_string()))
}

/// The faked clock a clock fault runs on, set up: the workers' (started on it by
/// [`super::spawn_worker`]), or the servers' (restarted on it here, before the workers come).
pub(super) async fn clock_for(
    plan: &Plan,
    backend: &Backend,
    nemesis: Nemesis,
) -> std::io::Result<Option<FakeClock>> {
    let dir = std::env::temp_dir().join("dlock-faults-clocks");
    if let Some(rate) = nemesis.client_clock_rate() {
        let clock = FakeClock::new(&dir)?;
        clock.set(&format!("+0 x{rate}"))?;
        return Ok(Some(clock));
    }
    if nemesis.on_fake_client_clock() {
        return FakeClock::new(&dir).map(Some);
    }
    if nemesis.server_clock_step().is_none() {
        return Ok(None);
    }
    // libfaketime cannot load into jemalloc-linked Redis, and slows the JVM to a crawl
    let servers = backend.clock_servers();
    if servers.is_empty() {
        return Err(std::io::Error::other(format!(
            "{}: no server whose clock can be stepped",
            backend.label
        )));
    }
    let clock = if backend.redis || backend.label.starts_with("zookeeper") {
        FakeClock::stepping(&dir)?
    } else {
        FakeClock::new(&dir)?
    };
    if !services_with(&plan.services, "restart", &servers, &clock.env(false)).await {
        let _ = services(&plan.services, "restart", &servers).await;
        return Err(std::io::Error::other(format!(
            "could not restart {servers:?} on a faked clock"
        )));
    }
    Ok(Some(clock))
}

/// Steps `clock` while a holder is mid-update (a rate fault runs from the start).
pub(super) async fn step_clock(
    nemesis: Nemesis,
    store: &FencedStore,
    clock: &FakeClock,
) -> (Duration, Option<u32>, bool) {
    let Some(step) = nemesis
        .client_clock_step()
        .or_else(|| nemesis.server_clock_step())
    else {
        return (store.now(), None, true);
    };
    let Some(v) = wait_for(|| mid_update(store), Duration::from_secs(5)).await else {
        return (store.now(), None, false);
    };
    let at = store.now();
    (at, Some(v), clock.set(&format!("{step:+}")).is_ok())
}

/// Puts a server clock fault's servers back on the true clock.
pub(super) async fn restore_clock(
    plan: &Plan,
    backend: &Backend,
    nemesis: Nemesis,
    clock: FakeClock,
) -> std::io::Result<()> {
    if nemesis.server_clock_step().is_none() {
        return Ok(());
    }
    let servers = backend.clock_servers();
    let restored = services(&plan.services, "restart", &servers).await;
    drop(clock);
    if restored {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "could not restart {servers:?} on the true clock"
        )))
    }
}
