//! `dlock run`: hold one lock, or several as one, while a command runs.

use std::process::ExitCode;
use std::sync::Arc;

use dlock_any::{
    Access, DistributedLock, GuardState, Instrumented, LockError, LockGuard, LockName, Locker,
    MultiGuard, ProcessHolder, SharedLock, format_duration,
};

use crate::child::{self, Ended, Signals, Stop};
use crate::cli::RunArgs;
use crate::{exit, grant, holder, metrics, progress, url};
use metrics_exporter_prometheus::PrometheusHandle;

pub async fn run(args: RunArgs) -> ExitCode {
    let metrics_on = args.metrics_addr.is_some() || args.metrics_textfile.is_some();
    let handle = match metrics_on.then(|| metrics::start(args.metrics_addr.as_deref())) {
        Some(Ok(h)) => Some(h),
        Some(Err(e)) => {
            eprintln!("dlock: warning: {e}; running without metrics");
            None
        }
        None => None,
    };
    let code = hold_and_run(&args, handle.clone()).await;
    // every outcome — a skipped or failed run too — leaves its figures
    if let (Some(h), Some(path)) = (&handle, &args.metrics_textfile)
        && let Err(e) = metrics::write_textfile(h, path)
    {
        eprintln!(
            "dlock: warning: cannot write metrics to {}: {e}",
            path.display()
        );
    }
    code
}

async fn hold_and_run(args: &RunArgs, handle: Option<PrometheusHandle>) -> ExitCode {
    let args = args.clone();
    let names = match dlock_any::canonical_names(&args.names) {
        Ok(n) => n,
        Err(e) => return exit::fail(&e),
    };
    if let Some(why) = crate::cli::hold_limits_refused(&args) {
        eprintln!("dlock: {why}");
        return ExitCode::from(exit::USAGE);
    }
    let resolved = url::resolve(args.backend.url.as_deref())
        .and_then(|u| url::fallback_allowed(&u, args.allow_unlocked).map(|_| u));
    let backend = match resolved {
        Ok(u) => match connect(&u, &args).await {
            Ok(b) => b,
            Err(e) => return exit::fail(&e),
        },
        Err(e) => return exit::fail(&e),
    };
    let mut locker = Locker::new(Arc::clone(&backend))
        .with_ttl(args.ttl)
        .with_wait(args.wait);
    if let Some(m) = args.max_hold {
        locker = locker.with_max_hold(m);
    }
    if let Some(m) = args.min_hold {
        locker = locker.with_min_hold(m);
    }
    // who holds it, for status, list and every waiter's message
    let me = ProcessHolder::this_process(&holder::command_name(&args.command));
    match me.to_value() {
        Ok(v) => locker = locker.with_value(v),
        Err(e) => return exit::fail(&e),
    }
    let Some(mut signals) = Signals::install() else {
        eprintln!("dlock: cannot install signal handlers");
        return ExitCode::from(exit::BACKEND);
    };
    let held = tokio::select! {
        held = take(&locker, &names, &args) => match held {
            Ok(held) => held,
            Err(code) => return code,
        },
        // the wait is dropped here, and with it its place in the queue (deleted before
        // dlock exits: see main)
        signal = signals.any() => return exit::signalled(signal),
    };
    // after a wait, the grant's time for status and list; then, a command never starts
    // on a lease already lost (broken, expired or cut off while a later name was
    // awaited, while this process was slow to get here, or as the proclaim found)
    let said = grant::say_granted(&*backend, &held, &me).await;
    if said.is_err() || !held.is_held() {
        let code = report_end(held.guards());
        let _ = held.release().await;
        return ExitCode::from(code);
    }
    let granted = std::time::Instant::now();
    tracing::info!(
        "took {} (token {}) after {}",
        grant::names_text(&names),
        held.guards()[0].lease().token(),
        format_duration(me.age())
    );
    let first = held.guards()[0].lease();
    let unlocked = held.guards().iter().any(|g| g.lease().fallback().is_some());
    if unlocked {
        eprintln!(
            "dlock: WARNING: the lock service is unreachable; running the command WITHOUT a \
             lock (fallback=proceed, --allow-unlocked): DLOCK_UNLOCKED=1, DLOCK_TOKEN=0"
        );
    }
    let tokens = held.tokens();
    let joined = |f: &dyn Fn(&(LockName, dlock_any::FencingToken)) -> String| {
        tokens.iter().map(f).collect::<Vec<_>>().join("\n")
    };
    let env = [
        ("DLOCK_NAME", first.name().to_string()),
        ("DLOCK_TOKEN", first.token().to_string()),
        ("DLOCK_OWNER", first.owner().to_string()),
        ("DLOCK_NAMES", joined(&|(n, _)| n.to_string())),
        ("DLOCK_TOKENS", joined(&|(_, t)| t.to_string())),
        (
            "DLOCK_UNLOCKED",
            if unlocked { "1" } else { "0" }.to_owned(),
        ),
    ];
    let stop = Stop {
        how: args.on_lost,
        grace: args.grace,
    };
    // the TTL the backend enforces (a ZooKeeper session's, say), not the one asked for
    let ttl = held
        .guards()
        .iter()
        .map(|g| g.lease().ttl())
        .min()
        .unwrap_or(args.ttl);
    let job = match child::spawn(
        &args.command,
        &env,
        stop.graces(ttl),
        earliest_valid_until(&held),
    ) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("dlock: cannot start the command's supervisor: {e}");
            let _ = held.release().await;
            return ExitCode::from(exit::CANNOT_EXEC);
        }
    };
    let hold = metrics::Hold::new(
        &names,
        backend.backend_name(),
        handle,
        args.metrics_textfile.clone(),
    );
    let supervised = child::supervise(
        job,
        child::Lease {
            lost: held.lost(),
            valid_until: || earliest_valid_until(&held),
            ttl,
        },
        &mut signals,
        stop,
    );
    let ended = tokio::select! {
        ended = supervised => ended,
        never = hold.watch() => match never {},
    };
    hold.ended();
    match ended {
        Ended::Exited(code) => {
            // lost while the command ran, unseen until now (a break between two
            // renewals, say), or run out (the supervisor stopped the command at the
            // lease's end): the command may have overlapped the next holder
            if !held.is_held() {
                let code = report_end(held.guards());
                let _ = held.release().await;
                return ExitCode::from(code);
            }
            if let Some(code) = release(held, &args, &mut signals).await {
                return ExitCode::from(code);
            }
            tracing::info!(
                "released {} after holding it {}; the command {}",
                grant::names_text(&names),
                format_duration(granted.elapsed()),
                code.as_ref().map_or_else(
                    |_| "could not be waited for".to_owned(),
                    |c| format!("exited {c}")
                )
            );
            match code {
                Ok(c) => ExitCode::from(c),
                Err(e) => {
                    eprintln!("dlock: waiting for the command failed: {e}");
                    ExitCode::from(exit::BACKEND)
                }
            }
        }
        Ended::Lost => {
            let code = report_end(held.guards());
            let _ = held.release().await;
            ExitCode::from(code)
        }
    }
}

/// When the first of the held leases runs out, as things stand.
fn earliest_valid_until(held: &MultiGuard) -> tokio::time::Instant {
    held.guards()
        .iter()
        .map(|g| g.lease().valid_until())
        .min()
        .unwrap_or_else(tokio::time::Instant::now)
}

/// How this run ends when it does not get the lock (`-q`, `--busy-exit`).
fn skipped(args: &RunArgs) -> exit::Skipped {
    exit::Skipped {
        quiet: args.quiet,
        code: args.busy_exit,
    }
}

/// Says why the hold ended early; the exit code for it.
fn report_end(guards: &[LockGuard]) -> u8 {
    let ended = guards.iter().find(|g| g.state().is_final());
    match ended {
        Some(g) if g.state() == GuardState::Expired => {
            let cap = g
                .policy()
                .max_hold
                .map_or_else(String::new, format_duration);
            eprintln!(
                "dlock: {} held for its --max-hold of {cap}; stopped the command",
                g.lease().name()
            );
            exit::MAX_HOLD
        }
        other => {
            let name = other.unwrap_or(&guards[0]).lease().name().clone();
            eprintln!("dlock: lease on {name} lost; stopped the command");
            exit::LEASE_LOST
        }
    }
}

/// Releases after the command ended; an exit code instead of the command's when the run
/// must not pass for a clean one, said on stderr: 75 when the release found a lease
/// already gone (broken by `release --force`, or run out unseen: the command may have
/// run beside the next holder). A release that fails is a warning: the lease was still
/// valid when the command ended, and now runs out by its TTL. A
/// `--min-hold` keeps the lock blocked on the server meanwhile, so a SIGTERM, SIGINT or
/// SIGHUP that comes during that wait ends dlock at once (the block outlives it; the
/// exit code says which signal).
async fn release(held: MultiGuard, args: &RunArgs, signals: &mut Signals) -> Option<u8> {
    let names: Vec<String> = held
        .guards()
        .iter()
        .map(|g| g.lease().name().to_string())
        .collect();
    if let Some(m) = args.min_hold
        && !args.quiet
    {
        eprintln!(
            "dlock: released; the lock stays blocked until {} after it was taken (--min-hold)",
            format_duration(m)
        );
    }
    tokio::select! {
        released = held.release() => match released {
            Ok(true) => None,
            Ok(false) => {
                eprintln!(
                    "dlock: the lock on {} was no longer held when the command ended (broken \
                     by release --force, or run out unseen): the command may have run beside \
                     the next holder",
                    names.join(", ")
                );
                Some(exit::LEASE_LOST)
            }
            Err(e) => {
                eprintln!("dlock: releasing failed ({e}); the lock expires by its TTL");
                None
            }
        },
        signal = signals.stop_requested() => {
            std::process::exit(128 + signal as i32);
        }
    }
}

/// The lock this run takes: NAME's plain lock, a permit of its semaphore, or one side
/// of its read-write lock — each as a `DistributedLock`, so the rest of the run is the
/// same.
async fn connect(url: &str, args: &RunArgs) -> Result<Arc<dyn DistributedLock>, LockError> {
    let side = if let Some(n) = args.permits {
        Access::Permit(n)
    } else if args.shared {
        Access::Read
    } else if args.exclusive {
        Access::Write
    } else {
        return dlock_any::connect(url).await;
    };
    let backend = dlock_any::connect_coordination(url).await?;
    let lock = match side {
        Access::Permit(n) => SharedLock::permits(backend, n)?,
        Access::Read => SharedLock::reads(backend),
        _ => SharedLock::writes(backend),
    };
    Ok(Arc::new(Instrumented::new(lock)))
}

/// Takes every name in canonical order ([`Locker::lock_all_with`]), reporting the
/// holder of the one it waits for; on any failure what was taken is released. `Err`
/// carries the exit code: with `--wait 0`, a busy name's holder is shown.
async fn take(locker: &Locker, names: &[LockName], args: &RunArgs) -> Result<MultiGuard, ExitCode> {
    let backend = locker.backend();
    let quiet = args.quiet || args.wait.is_zero();
    let mut current = None;
    let taken = locker
        .lock_all_with(names, |name| {
            current = Some(name.clone());
            let report = progress::report_holder(Arc::clone(backend), name.clone(), quiet);
            async move { match report.await {} }
        })
        .await;
    let e = match taken {
        Ok(held) => return Ok(held),
        Err(e) => e,
    };
    // a busy name under --wait 0 is named by its error (no wait, no hook call)
    let failed = match &e {
        LockError::Timeout { name, .. } | LockError::PermitsMismatch { name, .. } => {
            names.iter().find(|n| n.as_str() == name).cloned()
        }
        _ => None,
    };
    let Some(name) = failed.or(current) else {
        return Err(exit::fail(&e));
    };
    Err(match e {
        LockError::Timeout { .. } if args.wait.is_zero() => {
            exit::busy(&**backend, &name, skipped(args)).await
        }
        LockError::PermitsMismatch { .. } => exit::other_count(&e, args.wait, skipped(args)),
        _ if args.wait.is_zero() => exit::fail(&e),
        _ => exit::wait_failed(&name, args.wait, &e, skipped(args)),
    })
}
