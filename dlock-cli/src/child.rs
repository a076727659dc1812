//! The supervised command of `dlock run` and `dlock elect`: started with the lock's
//! facts in its environment under a helper that binds its whole process tree to
//! `dlock` ([`crate::supervisor`]), signals forwarded to its process group, the group
//! stopped when the lock is lost.

use std::ffi::OsString;
use std::future::Future;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::OnLost;
use crate::supervisor::{Graces, Job};

/// The signals forwarded to the command's group. Installed before the command starts:
/// a signal that arrives while it starts must be forwarded, not kill dlock (whose
/// death would still take the command down, but without the lock released).
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
    /// A SIGTERM, SIGINT or SIGQUIT was forwarded to a command: dlock was asked to stop
    /// (`dlock elect --requeue` then does not campaign again). Not SIGHUP: the usual
    /// "reload" signal, forwarded to a command that goes on running.
    stop_forwarded: bool,
}

impl Signals {
    pub fn install() -> Option<Self> {
        Some(Self {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
            quit: signal(SignalKind::quit()).ok()?,
            usr1: signal(SignalKind::user_defined1()).ok()?,
            usr2: signal(SignalKind::user_defined2()).ok()?,
            stop_forwarded: false,
        })
    }

    /// Whether a SIGTERM, SIGINT or SIGQUIT has been forwarded to a supervised command.
    pub fn stop_was_forwarded(&self) -> bool {
        self.stop_forwarded
    }

    /// The next of the six signals, while dlock waits for its lock and no command
    /// runs yet: each of them would end dlock by default, and it still does — but
    /// only after the wait is dropped, so what it queued is taken out again.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrived is kept for the next call.
    pub async fn any(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.hup.recv() => Signal::SIGHUP,
            _ = self.quit.recv() => Signal::SIGQUIT,
            _ = self.usr1.recv() => Signal::SIGUSR1,
            _ = self.usr2.recv() => Signal::SIGUSR2,
        }
    }

    /// The next stop (SIGTERM, SIGINT, SIGQUIT) while a `--requeue` candidate stands
    /// by or pauses; a SIGHUP, SIGUSR1 or SIGUSR2 then has no command to go to and is
    /// dropped (not kept for the next command).
    ///
    /// # Cancel safety
    /// Cancel safe: a stop that arrived is kept for the next call.
    pub async fn stop_requested_standing_by(&mut self) -> Signal {
        loop {
            tokio::select! {
                _ = self.term.recv() => return Signal::SIGTERM,
                _ = self.int.recv() => return Signal::SIGINT,
                _ = self.quit.recv() => return Signal::SIGQUIT,
                _ = self.hup.recv() => tracing::debug!("SIGHUP while standing by: no command to forward it to"),
                _ = self.usr1.recv() => tracing::debug!("SIGUSR1 while standing by: no command to forward it to"),
                _ = self.usr2.recv() => tracing::debug!("SIGUSR2 while standing by: no command to forward it to"),
            }
        }
    }

    fn forward_stop(&mut self, job: &mut Job, signal: Signal) {
        self.stop_forwarded = true;
        job.signal(signal);
    }

    /// The next signal that asks dlock itself to stop (SIGTERM, SIGINT, SIGHUP):
    /// for the phases without a command, such as a release that lingers.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrived is kept for the next call.
    pub async fn stop_requested(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }
}

/// How to stop the command when the lock is lost.
#[derive(Clone, Copy)]
pub struct Stop {
    pub how: OnLost,
    pub grace: Duration,
}

impl Stop {
    /// The helper's graces under a lease of `ttl`: after dlock's own death the group
    /// gets at most a quarter of the TTL (the lease has at least that much left
    /// while renewals succeed), and nothing with `--on-lost kill`.
    pub fn graces(self, ttl: Duration) -> Graces {
        let death = match self.how {
            OnLost::Kill => Duration::ZERO,
            OnLost::Term => self.grace.min(ttl / 4),
        };
        Graces {
            stop: self.grace,
            death,
        }
    }
}

/// Starts `command` with `env` added to dlock's environment, in a process group of its
/// own bound to dlock's life and to the lease (valid until `valid_until`).
pub fn spawn(
    command: &[OsString],
    env: &[(&str, String)],
    graces: Graces,
    valid_until: tokio::time::Instant,
) -> std::io::Result<Job> {
    Job::start(command, env, graces, valid_until)
}

/// What the supervision watches: the lease's end, and how long it lasts now.
pub struct Lease<L, V> {
    /// Completes when the lease is lost.
    pub lost: L,
    /// The lease's current `valid_until` (the earliest, when several are held).
    pub valid_until: V,
    /// Its TTL: the new `valid_until` is passed on every tenth of it.
    pub ttl: Duration,
}

/// How a supervised command ended.
pub enum Ended {
    /// It exited by itself (with this code: 128+N when signal N ended it, 127 when it
    /// could not be started), and nothing of its group runs any more.
    Exited(std::io::Result<u8>),
    /// The lock was lost first; the command's group has been stopped.
    Lost,
}

/// Waits for the command, forwarding SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and
/// SIGUSR2 to its group, passing each renewal's deadline to its helper, and stops the
/// group if the lease is lost first.
pub async fn supervise(
    mut job: Job,
    lease: Lease<impl Future<Output = ()>, impl Fn() -> tokio::time::Instant>,
    signals: &mut Signals,
    stop_by: Stop,
) -> Ended {
    let Lease {
        lost,
        valid_until,
        ttl,
    } = lease;
    tokio::pin!(lost);
    let every = (ttl / 10).clamp(Duration::from_millis(20), Duration::from_secs(1));
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            code = job.wait() => return Ended::Exited(code),
            _ = tick.tick() => job.lease_renewed(valid_until()),
            () = &mut lost => {
                job.stop(stop_by.how == OnLost::Kill, stop_by.grace, valid_until()).await;
                return Ended::Lost;
            }
            _ = signals.term.recv() => signals.forward_stop(&mut job, Signal::SIGTERM),
            _ = signals.int.recv() => signals.forward_stop(&mut job, Signal::SIGINT),
            _ = signals.hup.recv() => job.signal(Signal::SIGHUP),
            _ = signals.quit.recv() => signals.forward_stop(&mut job, Signal::SIGQUIT),
            _ = signals.usr1.recv() => job.signal(Signal::SIGUSR1),
            _ = signals.usr2.recv() => job.signal(Signal::SIGUSR2),
        }
    }
}
