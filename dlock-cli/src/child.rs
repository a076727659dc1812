//! The supervised command of `dlock run` and `dlock elect`: started with the lock's
//! facts in its environment, signals forwarded to it, stopped when the lock is lost.

use std::ffi::OsString;
use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::OnLost;

/// The signals forwarded to the command. Installed before the command starts: a
/// signal that arrives while it starts must be forwarded, not kill dlock and leave the
/// command running unsupervised.
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn install() -> Option<Self> {
        Some(Self {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
        })
    }
}

/// Starts `command` with `env` added to dlock's environment.
pub fn spawn(command: &[OsString], env: &[(&str, String)]) -> std::io::Result<Child> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command"))?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn()
}

/// How a supervised command ended.
pub enum Ended {
    /// It exited by itself.
    Exited(std::io::Result<ExitStatus>),
    /// The lock was lost first; the command has been stopped.
    Lost,
}

/// How to stop the command when the lock is lost.
#[derive(Clone, Copy)]
pub struct Stop {
    pub how: OnLost,
    pub grace: Duration,
}

/// Waits for the command, forwarding SIGINT/SIGTERM/SIGHUP to it, and stops it if
/// `lost` completes first.
pub async fn supervise(
    mut child: Child,
    lost: impl Future<Output = ()>,
    signals: Signals,
    stop_by: Stop,
) -> Ended {
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .map(Pid::from_raw);
    let Signals {
        mut term,
        mut int,
        mut hup,
    } = signals;
    tokio::pin!(lost);
    loop {
        tokio::select! {
            status = child.wait() => return Ended::Exited(status),
            () = &mut lost => {
                stop(&mut child, pid, stop_by).await;
                return Ended::Lost;
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

async fn stop(child: &mut Child, pid: Option<Pid>, by: Stop) {
    if by.how == OnLost::Term {
        forward(pid, Signal::SIGTERM);
        if tokio::time::timeout(by.grace, child.wait()).await.is_ok() {
            return;
        }
        eprintln!(
            "dlock: the command ignored SIGTERM for {}; killing it",
            dlock_any::format_duration(by.grace)
        );
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// The command's exit status as ours: its code, or 128+N when signal N killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(1),
        _ => 1,
    }
}
