//! Applying one fault to a running workload.

use std::path::Path;
use std::time::Duration;

use dlock_conformance::{FaultMode, url_host_port};
use nix::sys::signal::Signal;
use tokio::time::sleep;

use super::victims::{
    holder, mid_update, read_above, reading, victim, wait_for, waiter, write_above,
    writer_mid_update,
};
use super::{Plan, Worker, signal};
use crate::backends::Backend;
use crate::clock::FakeClock;
use crate::nemesis::{Nemesis, leader, redis_command, services};
use crate::replica::LaggingReplica;
use crate::standby::Standby;
use crate::store::FencedStore;

/// Stops a worker between its read and its write (found by `find`, with its token).
/// On a busy machine the signal can land after the write: then it is let go and
/// another one caught, up to 20 times. Returns when it was stopped, whom, its token.
async fn stop_mid_update(
    workers: &[Worker],
    store: &FencedStore,
    mut find: impl FnMut() -> Option<(u32, u64)>,
) -> Option<(Duration, u32, u64)> {
    for _ in 0..20 {
        let (v, token) = wait_for(&mut find, Duration::from_secs(5)).await?;
        let at = store.now();
        signal(&workers[v as usize], Signal::SIGSTOP);
        sleep(Duration::from_millis(50)).await;
        if reading(store, v) {
            return Some((at, v, token));
        }
        signal(&workers[v as usize], Signal::SIGCONT);
    }
    None
}

/// Applies the fault; returns when it was applied, its victim, and whether it was.
pub(super) async fn apply(
    plan: &Plan,
    backend: &Backend,
    (nemesis, clock): (Nemesis, Option<&FakeClock>),
    store: &FencedStore,
    name: &str,
    workers: &mut [Worker],
) -> (Duration, Option<u32>, bool) {
    let past_ttl = plan.ttl + Duration::from_millis(1500);
    let script: &Path = &plan.services;
    match nemesis {
        Nemesis::KillHolder => {
            let Some(v) = wait_for(|| victim(plan, store), Duration::from_secs(5)).await else {
                return (store.now(), None, false);
            };
            let at = store.now();
            signal(&workers[v as usize], Signal::SIGKILL);
            (at, Some(v), true)
        }
        Nemesis::KillWaiter => {
            let Some(v) = wait_for(|| waiter(store, plan.workers), Duration::from_secs(5)).await
            else {
                return (store.now(), None, false);
            };
            let at = store.now();
            signal(&workers[v as usize], Signal::SIGKILL);
            (at, Some(v), true)
        }
        Nemesis::PauseHolder => {
            let mid = || mid_update(store).map(|w| (w, 0));
            let Some((at, v, _)) = stop_mid_update(workers, store, mid).await else {
                return (store.now(), None, false);
            };
            sleep(past_ttl).await;
            signal(&workers[v as usize], Signal::SIGCONT);
            (at, Some(v), true)
        }
        Nemesis::RevokeHolder => {
            // boxed: a whole client's connect would weigh on every fault's future
            let Some(lock) = Box::pin(dlock_any::connect(&backend.url)).await.ok() else {
                return (store.now(), None, false);
            };
            let Ok(name) = dlock_any::LockName::new(name) else {
                return (store.now(), None, false);
            };
            // the holder mid-update may be done before the revoke reaches the server:
            // then the one after it is revoked, or nobody and we try again
            for _ in 0..10 {
                let Some(v) = wait_for(|| mid_update(store), Duration::from_secs(5)).await else {
                    break;
                };
                let at = store.now();
                if let Ok(Some(_)) = lock.revoke_holder(&name).await {
                    return (at, Some(v), true);
                }
            }
            (store.now(), None, false)
        }
        Nemesis::PauseWriter => {
            for _ in 0..5 {
                let mid = || writer_mid_update(store);
                let Some((at, v, token)) = stop_mid_update(workers, store, mid).await else {
                    break;
                };
                sleep(past_ttl).await;
                let read = wait_for(
                    || read_above(store, token, at).then_some(()),
                    Duration::from_secs(5),
                )
                .await
                .is_some();
                // resumed at once, so its stale write meets the fence the reader raised
                // (the runs' only writer is the paused one: checked all the same, as a
                // later writer's write would have raised the fence first)
                let isolated = !write_above(store, token, at);
                signal(&workers[v as usize], Signal::SIGCONT);
                if read && isolated {
                    return (at, Some(v), true);
                }
            }
            (store.now(), None, false)
        }
        Nemesis::Partition => {
            let Some(v) = wait_for(|| victim(plan, store), Duration::from_secs(5)).await else {
                return (store.now(), None, false);
            };
            let at = store.now();
            for p in &workers[v as usize].proxies {
                p.set_mode(FaultMode::Blackhole);
            }
            sleep(past_ttl).await;
            for p in &workers[v as usize].proxies {
                p.set_mode(FaultMode::Pass);
            }
            (at, Some(v), true)
        }
        Nemesis::Latency => {
            let at = store.now();
            for w in workers.iter() {
                for p in &w.proxies {
                    p.set_mode(FaultMode::Delay(Duration::from_millis(100)));
                }
            }
            sleep(Duration::from_secs(2)).await;
            for w in workers.iter() {
                for p in &w.proxies {
                    p.set_mode(FaultMode::Pass);
                }
            }
            (at, None, true)
        }
        Nemesis::RestartServer => {
            let at = store.now();
            let ok = services(script, "restart", &backend.servers).await;
            (at, None, ok)
        }
        Nemesis::DataLoss => {
            let hosts: Vec<String> = url_host_port(&backend.url)
                .map(|a| a.split(',').map(str::to_owned).collect())
                .unwrap_or_default();
            let mut ok = !hosts.is_empty();
            for h in &hosts {
                ok &= redis_command(h, &["SAVE"]).await;
            }
            // the workload moves on: holders change, counters grow
            sleep(Duration::from_millis(1500)).await;
            let at = store.now();
            for h in &hosts {
                ok &= redis_command(h, &["DEBUG", "RELOAD", "NOSAVE"]).await;
            }
            (at, None, ok)
        }
        Nemesis::LaggingReplica => {
            let Some(primary) = url_host_port(&backend.url) else {
                return (store.now(), None, false);
            };
            let Some(replica) = LaggingReplica::start(&primary).await else {
                return (store.now(), None, false);
            };
            let cut = replica.cut().await;
            // the workload moves on without the replica: holders change, counters grow
            sleep(Duration::from_millis(1500)).await;
            let at = store.now();
            let ok = replica.promote().await;
            (at, None, cut && ok)
        }
        Nemesis::SentinelFailover => {
            let ok = crate::sentinel::fail_over_to_a_lagging_replica(script, &backend.url).await;
            (store.now(), None, ok)
        }
        Nemesis::ClusterFailover => {
            let ok =
                crate::cluster::fail_over_to_a_lagging_replica(script, &backend.url, name).await;
            (store.now(), None, ok)
        }
        Nemesis::StandbyPromoted => {
            let (Some(primary), Ok(standby_url)) = (
                url_host_port(&backend.url),
                std::env::var("DLOCK_TEST_POSTGRES_STANDBY_URL"),
            ) else {
                return (store.now(), None, false);
            };
            let Some(standby) = Standby::attach(&primary, &standby_url).await else {
                return (store.now(), None, false);
            };
            standby.cut();
            // the workload moves on without the standby: holders change, tokens grow
            sleep(Duration::from_millis(1500)).await;
            let at = store.now();
            let Some(new_primary) = standby.promote().await else {
                return (at, None, false);
            };
            for w in workers.iter() {
                for p in &w.proxies {
                    p.retarget(new_primary);
                }
            }
            (at, None, true)
        }
        Nemesis::ServerPartition => {
            let Some(ensemble) = &backend.ensemble else {
                return (store.now(), None, false);
            };
            let e = ensemble;
            // a holder connected to a follower (worker i talks to server i % 3)
            for _ in 0..20 {
                let Some(leader) = e.leader().await else {
                    sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let Some(v) = wait_for(|| holder(store), Duration::from_secs(5)).await else {
                    break;
                };
                let server = usize::try_from(v).unwrap_or(0) % e.client_addrs().len();
                if server == leader {
                    sleep(Duration::from_millis(50)).await;
                    continue;
                }
                let at = store.now();
                e.partition(server);
                // past the TTL and past the follower's own give-up (syncLimit, 3 s)
                sleep(past_ttl + Duration::from_secs(2)).await;
                e.heal(server);
                return (at, Some(v), true);
            }
            (store.now(), None, false)
        }
        Nemesis::ClientClockAhead
        | Nemesis::ClientClockBehind
        | Nemesis::ClientClockSlow
        | Nemesis::ClientClockVerySlow
        | Nemesis::ClientClockFast
        | Nemesis::ServerClockAhead
        | Nemesis::ServerClockBehind => (store.now(), None, false), // see `step_clock`
        Nemesis::RedlockNodeForgets => {
            let Some(clock) = clock else {
                return (store.now(), None, false);
            };
            redlock_node_forgets(script, backend, store, clock, workers).await
        }
        Nemesis::KillMember | Nemesis::KillLeader => {
            let victims: Vec<&str> = if backend.has_leader {
                let hosts: Vec<String> = url_host_port(&backend.url)
                    .map(|a| a.split(',').map(str::to_owned).collect())
                    .unwrap_or_default();
                let Some(l) = leader(&hosts, backend.label.starts_with("etcd")).await else {
                    return (store.now(), None, false);
                };
                let i = if nemesis == Nemesis::KillLeader {
                    l
                } else {
                    (l + 1) % hosts.len()
                };
                vec![backend.servers[i]]
            } else {
                // Redlock: two of five masters
                backend.servers[..2].to_vec()
            };
            let at = store.now();
            let killed = services(script, "kill", &victims).await;
            sleep(Duration::from_secs(2)).await;
            let started = services(script, "start", &victims).await;
            (at, None, killed && started)
        }
    }
}

/// [`Nemesis::RedlockNodeForgets`]: nodes 0 and 1 cut off, clocks +20 s; then clocks
/// back, every node cut off while node 2 restarts empty, and 0, 1 and 2 healed for 3 s
/// before 3 and 4 are. A cut drops the requests in flight and a heal those sent
/// meanwhile (a partition long enough for the clients to give up on them): a request
/// delivered late would let a cut-off node catch up with the others' counters, and so
/// would a round that reached 3 or 4 beside a minority of the others.
async fn redlock_node_forgets(
    script: &Path,
    backend: &Backend,
    store: &FencedStore,
    clock: &FakeClock,
    workers: &[Worker],
) -> (Duration, Option<u32>, bool) {
    let cut = |nodes: std::ops::Range<usize>, cut: bool| {
        for w in workers {
            for p in w.proxies.get(nodes.clone()).unwrap_or_default() {
                if cut {
                    p.set_mode(FaultMode::Blackhole);
                    p.reset();
                } else {
                    p.reset();
                    p.set_mode(FaultMode::Pass);
                }
            }
        }
    };
    let Some(&forgetful) = backend.servers.get(2) else {
        return (store.now(), None, false);
    };
    cut(0..2, true);
    let at = store.now();
    let mut ok = clock.set("+20").is_ok();
    // grants on nodes 2-4 alone, proposed from clocks 20 s ahead
    sleep(Duration::from_millis(1500)).await;
    ok &= clock.set("+0").is_ok();
    cut(2..5, true);
    ok &= services(script, "kill", &[forgetful]).await;
    ok &= services(script, "start", &[forgetful]).await;
    cut(0..3, false);
    // long enough for the workers' connections to come back
    sleep(Duration::from_secs(3)).await;
    cut(3..5, false);
    (at, None, ok)
}
