//! The small process between `dlock` and the command (`dlock __supervise …`). It is
//! the child subreaper of everything the command starts (`tree.rs`), leads the
//! command's process group, and takes the whole tree down — every descendant by
//! parentage, whatever its group or session:
//!
//! - when `dlock` dies, by any signal, SIGKILL included: its parent-death signal
//!   (`PR_SET_PDEATHSIG`) or the end of `dlock`'s order pipe, whichever comes first —
//!   SIGKILL by the earlier of the death grace and the lease's deadline;
//! - when the lease's deadline comes without a renewal reaching it (`dlock` stopped,
//!   starved, or cut off): SIGTERM a death grace before the deadline, SIGKILL at it;
//! - when `dlock` orders it (the lease lost, `--max-hold`): SIGTERM now, SIGKILL at the
//!   earlier of the grace and the deadline;
//! - after the command exits, whatever it left running (SIGTERM, SIGKILL at the
//!   earlier of the grace and the deadline), so the lock is released only once the tree
//!   is empty.
//!
//! It never starts the command on a lease already over. It runs no async runtime. The
//! signals it takes have handlers that write to a pipe it polls with the order pipe
//! (never a blocked mask, which the command would inherit across `exec`; handlers are
//! reset there): a SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2 that reaches it
//! came from a terminal to the whole group (the command got it too) and it carries on;
//! the signals `dlock` forwards come as orders, read once the command runs, so one
//! forwarded while the helper starts still reaches the command.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::prctl;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getpgrp, getpid, getppid};

use super::orders::{Heard, Order, OrderReceiver, monotonic_now};
use super::terminal::Terminal;
use super::tree;
use crate::exit;

/// The hidden subcommand: `dlock __supervise PARENT_PID PIPE DEADLINE_NS DEATH_GRACE_MS
/// GRACE_MS -- COMMAND…`.
pub const SUBCOMMAND: &str = "__supervise";

/// The signals the helper takes: with a handler installed none of them can end it,
/// and none of the job-control ones (Ctrl-Z, a background write to a terminal with
/// `tostop`) can stop it while it guards a deadline. Handlers are reset at `exec`: the
/// command gets every one of them as usual.
const WATCHED: [i32; 10] = [
    signal_hook::consts::SIGCHLD,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
    signal_hook::consts::SIGUSR1,
    signal_hook::consts::SIGUSR2,
    signal_hook::consts::SIGTSTP,
    signal_hook::consts::SIGTTIN,
    signal_hook::consts::SIGTTOU,
];

/// What the helper was told, from its arguments.
struct Orders {
    parent: Pid,
    pipe: String,
    deadline: Duration,
    death_grace: Duration,
    grace: Duration,
    command: Vec<OsString>,
}

fn orders(args: &[OsString]) -> Option<Orders> {
    let number = |a: &OsString| a.to_str()?.parse::<u64>().ok();
    let [
        pid,
        pipe,
        deadline,
        death_ms,
        grace_ms,
        dashes,
        command @ ..,
    ] = args
    else {
        return None;
    };
    if dashes != "--" || command.is_empty() {
        return None;
    }
    Some(Orders {
        parent: Pid::from_raw(i32::try_from(number(pid)?).ok()?),
        pipe: pipe.to_str()?.to_owned(),
        deadline: Duration::from_nanos(number(deadline)?),
        death_grace: Duration::from_millis(number(death_ms)?),
        grace: Duration::from_millis(number(grace_ms)?),
        command: command.to_vec(),
    })
}

/// The helper's `main`: `args` are those after the subcommand; the exit code is the
/// command's (128+N when signal N ended it; 127 when it could not be started), or 75
/// when the lease's deadline came first.
pub fn main(args: &[OsString]) -> u8 {
    let Some(orders) = orders(args) else {
        eprintln!("dlock: {SUBCOMMAND} is dlock's own helper, not a command to run");
        return exit::USAGE;
    };
    let Some(mut wakeups) = Wakeups::install() else {
        eprintln!("dlock: cannot set up the command's supervisor (signals)");
        return exit::BACKEND;
    };
    if prctl::set_pdeathsig(Signal::SIGTERM).is_err() || prctl::set_child_subreaper(true).is_err() {
        eprintln!("dlock: cannot set up the command's supervisor (prctl)");
        return exit::BACKEND;
    }
    // dlock may have died before the death signal was asked for: nothing to guard
    if getppid() != orders.parent {
        return exit::LEASE_LOST;
    }
    let mut pipe = match OrderReceiver::open(&orders.pipe, orders.parent) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "dlock: cannot set up the command's supervisor ({}: {e})",
                orders.pipe
            );
            return exit::BACKEND;
        }
    };
    // a command never starts on a lease already over (dlock checked before it started
    // this helper, which took its time to start)
    if monotonic_now() >= orders.deadline.saturating_sub(orders.death_grace) {
        eprintln!("dlock: the lease ran out before the command could start; not starting it");
        return exit::LEASE_LOST;
    }
    let terminal = Terminal::take();
    let (program, rest) = (&orders.command[0], &orders.command[1..]);
    let code = match Command::new(program).args(rest).spawn() {
        Ok(child) => {
            let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
            supervise(&orders, &mut wakeups, &mut pipe, pid)
        }
        Err(e) => {
            eprintln!("dlock: cannot start {:?}: {e}", program.to_string_lossy());
            if e.kind() == std::io::ErrorKind::NotFound {
                exit::CANNOT_EXEC
            } else {
                exit::NOT_EXECUTABLE
            }
        }
    };
    terminal.give_back();
    code
}

/// Waits for the command, its deadline, `dlock`'s orders and `dlock` itself; see the
/// module doc.
fn supervise(orders: &Orders, wakeups: &mut Wakeups, pipe: &mut OrderReceiver, command: Pid) -> u8 {
    let me = getpid();
    let mut deadline = orders.deadline;
    loop {
        if let Some(code) = tree::reap(Some(command)) {
            sweep(me, orders.grace, deadline);
            return code;
        }
        let stop_at = deadline.saturating_sub(orders.death_grace);
        let now = monotonic_now();
        if now >= stop_at {
            let _ = tree::stop(me, Some(command), instant(deadline));
            say("the lease was not renewed in time; stopped the command's process tree");
            return exit::LEASE_LOST;
        }
        let wait = PollTimeout::try_from(stop_at - now + Duration::from_millis(1))
            .unwrap_or(PollTimeout::MAX);
        let (heard, gone) = match wakeups.wait(pipe, wait) {
            // reparented: the death signal may still be on its way
            Heard::Orders(heard) => (heard, getppid() != orders.parent),
            Heard::Gone(heard) => (heard, true),
        };
        for order in heard {
            match order {
                Order::Deadline(d) => deadline = d,
                Order::Signal(s) => {
                    if let Ok(signal) = Signal::try_from(s) {
                        let _ = killpg(getpgrp(), signal);
                    }
                }
                Order::Stop(kill_at) => {
                    let code = tree::stop(me, Some(command), instant(kill_at.min(deadline)));
                    return code.unwrap_or(exit::LEASE_LOST);
                }
            }
        }
        if gone {
            let kill_at = (monotonic_now() + orders.death_grace).min(deadline);
            let code = tree::stop(me, Some(command), instant(kill_at));
            say("dlock is gone; stopped the command's process tree");
            return code.unwrap_or(exit::LEASE_LOST);
        }
    }
}

/// `at` on `CLOCK_MONOTONIC` as an [`Instant`] (now, if it has passed).
fn instant(at: Duration) -> Instant {
    Instant::now() + at.saturating_sub(monotonic_now())
}

/// After the command ended: whatever it left running in its tree gets SIGTERM, and
/// SIGKILL at the earlier of `grace` and the lease's `deadline`.
fn sweep(me: Pid, grace: Duration, deadline: Duration) {
    let left = tree::descendants(me);
    if left.is_empty() {
        return;
    }
    let kill_at = (monotonic_now() + grace).min(deadline);
    let _ = tree::stop(me, None, instant(kill_at));
    say(&format!(
        "the command exited leaving {} process(es) of its tree running; stopped them",
        left.len()
    ));
}

/// Says `what` on stderr, after the act it reports: a stderr that fails (a reader gone,
/// a terminal hung up) must neither stop the helper before it acts nor end it (as
/// `eprintln!` would, panicking).
pub(super) fn say(what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "dlock: {what}");
}

/// The watched signals, each written to a socket as it comes (the self-pipe trick of
/// `signal-hook`), so one `poll` waits for a signal, a deadline or a timeout.
struct Wakeups {
    signals: UnixStream,
}

impl Wakeups {
    fn install() -> Option<Self> {
        let (read, write) = UnixStream::pair().ok()?;
        read.set_nonblocking(true).ok()?;
        for signal in WATCHED {
            signal_hook::low_level::pipe::register(signal, write.try_clone().ok()?).ok()?;
        }
        Some(Self { signals: read })
    }

    /// Waits up to `timeout` for a signal or news on the order pipe; what the pipe
    /// said. (Which signal came does not matter: every wake-up reaps and checks that
    /// `dlock` is still the parent.)
    fn wait(&mut self, lease: &mut OrderReceiver, timeout: PollTimeout) -> Heard {
        let mut fds = [
            PollFd::new(self.signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(lease.file().as_fd(), PollFlags::POLLIN),
        ];
        let _ = poll(&mut fds, timeout);
        let mut buf = [0u8; 64];
        while matches!(self.signals.read(&mut buf), Ok(n) if n > 0) {}
        lease.read()
    }
}

/// The exit code a helper's status stands for, as `dlock` reports it (the helper
/// exits with the command's code; 128+N if the helper itself was ended by signal N).
pub fn code_of(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(1),
        _ => 1,
    }
}
