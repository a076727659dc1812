//! `dlock run`: hold a lock while a command runs.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitCode, ExitStatus};
use std::sync::Arc;
use std::time::Duration;

use dlock_any::{
    Access, DistributedLock, Instrumented, Lease, LockError, LockGuard, LockName, SharedLock,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::{OnLost, RunArgs};
use crate::{exit, progress, url};

pub async fn run(args: RunArgs) -> ExitCode {
    let name = match LockName::new(&args.name) {
        Ok(n) => n,
        Err(e) => return exit::fail(&e),
    };
    if let Some(addr) = args.metrics_addr
        && let Err(e) = crate::metrics::serve(addr).await
    {
        eprintln!("dlock: {e}");
        return ExitCode::from(exit::USAGE);
    }
    let backend = match url::resolve(args.backend.url.as_deref()) {
        Ok(u) => match connect(&u, &args).await {
            Ok(b) => b,
            Err(e) => return exit::fail(&e),
        },
        Err(e) => return exit::fail(&e),
    };
    let lease = match take(&backend, &name, &args).await {
        Ok(lease) => lease,
        Err(code) => return code,
    };
    let guard = LockGuard::new(Arc::clone(&backend), lease.clone());
    // Before the command starts: a signal that arrives while it starts must be
    // forwarded, not kill dlock and leave the command running unsupervised.
    let Some(signals) = Signals::install() else {
        eprintln!("dlock: cannot install signal handlers");
        let _ = guard.release().await;
        return ExitCode::from(exit::BACKEND);
    };
    let child = Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("DLOCK_NAME", name.as_str())
        .env("DLOCK_TOKEN", lease.token().to_string())
        .env("DLOCK_OWNER", lease.owner().as_str())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dlock: cannot start {:?}: {e}", args.command[0]);
            let _ = guard.release().await;
            return ExitCode::from(exit::CANNOT_EXEC);
        }
    };
    supervise(child, guard, signals, &args).await
}

/// The signals `dlock run` forwards to its command.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Option<Self> {
        Some(Self {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
        })
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

/// Takes the lock, reporting the holder while waiting. `Err` carries the exit code.
async fn take(
    backend: &Arc<dyn DistributedLock>,
    name: &LockName,
    args: &RunArgs,
) -> Result<Lease, ExitCode> {
    if args.wait.is_zero() {
        return match backend.try_acquire(name, args.ttl).await {
            Ok(Some(lease)) => Ok(lease),
            Ok(None) => {
                let holder = match backend.inspect(name).await {
                    Ok(Some(h)) => format!(" by {} (token {})", h.owner, h.token),
                    _ => String::new(),
                };
                eprintln!("dlock: {name} is held{holder}; not waiting (--wait 0)");
                Err(ExitCode::from(exit::BUSY))
            }
            Err(e) => Err(exit::fail(&e)),
        };
    }
    let acquire = backend.acquire(name, args.ttl, args.wait);
    let report = progress::report_holder(Arc::clone(backend), name.clone(), args.quiet);
    tokio::select! {
        r = acquire => r.map_err(|e| match e {
            LockError::Timeout { .. } => {
                eprintln!("dlock: gave up waiting for {name} after {}", dlock_any::format_duration(args.wait));
                ExitCode::from(exit::TIMEOUT)
            }
            e => exit::fail(&e),
        }),
        never = report => match never {},
    }
}

/// Waits for the command, forwarding SIGINT/SIGTERM/SIGHUP to it, and stops it if the
/// lease is lost.
async fn supervise(
    mut child: Child,
    guard: LockGuard,
    signals: Signals,
    args: &RunArgs,
) -> ExitCode {
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .map(Pid::from_raw);
    let Signals {
        mut term,
        mut int,
        mut hup,
    } = signals;
    let lost = guard.lost();
    tokio::pin!(lost);
    loop {
        tokio::select! {
            status = child.wait() => {
                let name = guard.lease().name().clone();
                if let Err(e) = guard.release().await {
                    eprintln!("dlock: releasing {name} failed ({e}); it expires by its TTL");
                }
                return match status {
                    Ok(s) => ExitCode::from(exit_code(s)),
                    Err(e) => {
                        eprintln!("dlock: waiting for the command failed: {e}");
                        ExitCode::from(exit::BACKEND)
                    }
                };
            }
            () = &mut lost => {
                eprintln!("dlock: lease on {} lost; stopping the command", guard.lease().name());
                stop(&mut child, pid, args.on_lost, args.grace).await;
                return ExitCode::from(exit::LEASE_LOST);
            }
            _ = term.recv() => forward(pid, Signal::SIGTERM),
            _ = int.recv() => forward(pid, Signal::SIGINT),
            _ = hup.recv() => forward(pid, Signal::SIGHUP),
        }
    }
}

fn forward(pid: Option<Pid>, sig: Signal) {
    if let Some(pid) = pid {
        let _ = kill(pid, sig);
    }
}

async fn stop(child: &mut Child, pid: Option<Pid>, how: OnLost, grace: Duration) {
    if how == OnLost::Term {
        forward(pid, Signal::SIGTERM);
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
        eprintln!(
            "dlock: the command ignored SIGTERM for {}; killing it",
            dlock_any::format_duration(grace)
        );
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// The command's exit status as ours: its code, or 128+N when signal N killed it.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(1),
        _ => 1,
    }
}
