//! `dlock`'s side of a supervised command: the helper started in a process group of
//! its own (which the command joins), every stop and forwarded signal sent to that
//! group, and the group found empty before the lock is released.

use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::deadline::{DeadlineSender, on_monotonic_clock};
use super::helper;

/// The command's process group, led by the helper (see [`helper`]).
pub struct Job {
    helper: Child,
    group: Pid,
    deadline: DeadlineSender,
}

/// How long the command's group gets to stop after a SIGTERM.
#[derive(Clone, Copy, Debug)]
pub struct Graces {
    /// After a stop `dlock` sends (lease lost, `--max-hold`) or a sweep of what the
    /// command left running.
    pub stop: Duration,
    /// After `dlock` itself died: shorter than what is left of the lease, which
    /// nobody renews any more.
    pub death: Duration,
}

impl Job {
    /// Starts `command` with `env` under a new helper. Call it from the thread that
    /// lives as long as `dlock` (the main thread): the helper's parent-death signal
    /// follows the thread that started it.
    ///
    /// # Errors
    /// When the helper cannot be started (the command not starting is the helper's
    /// exit code 127, printed by it).
    /// `valid_until` is the lease's (the earliest of the leases' when several names
    /// are held): the helper stops the group before it unless told of a later one
    /// ([`Job::lease_renewed`]).
    pub fn start(
        command: &[OsString],
        env: &[(&str, String)],
        graces: Graces,
        valid_until: tokio::time::Instant,
    ) -> std::io::Result<Self> {
        let deadline = DeadlineSender::new()?;
        // the running binary even if it was replaced on disk since
        let me = if std::path::Path::new("/proc/self/exe").exists() {
            std::path::PathBuf::from("/proc/self/exe")
        } else {
            std::env::current_exe()?
        };
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).to_string();
        let mut cmd = Command::new(me);
        let nanos = on_monotonic_clock(valid_until).as_nanos().to_string();
        cmd.arg(helper::SUBCOMMAND)
            .arg(std::process::id().to_string())
            .arg(deadline.path())
            .arg(nanos)
            .arg(millis(graces.death))
            .arg(millis(graces.stop))
            .arg("--")
            .args(command)
            .process_group(0);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let helper = cmd.spawn()?;
        let pid = helper
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| std::io::Error::other("the supervisor has no pid"))?;
        Ok(Self {
            helper,
            group: Pid::from_raw(pid),
            deadline,
        })
    }

    /// Tells the helper the lease now lasts until `valid_until`.
    pub fn lease_renewed(&mut self, valid_until: tokio::time::Instant) {
        self.deadline.send(on_monotonic_clock(valid_until));
    }

    /// Sends `signal` to the command's whole process group.
    pub fn signal(&self, signal: Signal) {
        let _ = killpg(self.group, signal);
    }

    /// Waits until the command has ended and its group is empty; the command's exit
    /// code (128+N when signal N ended it).
    ///
    /// # Cancel safety
    /// Dropping it before the helper exited changes nothing; call it again.
    pub async fn wait(&mut self) -> std::io::Result<u8> {
        let status = self.helper.wait().await?;
        self.empty_group().await;
        Ok(helper::code_of(status))
    }

    /// Stops the command's group: SIGTERM and, after `grace`, SIGKILL (`kill_at_once`:
    /// SIGKILL straight away). Returns once the group is empty.
    pub async fn stop(&mut self, kill_at_once: bool, grace: Duration) {
        if !kill_at_once {
            self.signal(Signal::SIGTERM);
            if tokio::time::timeout(grace, self.helper.wait())
                .await
                .is_ok()
            {
                self.empty_group().await;
                return;
            }
            eprintln!(
                "dlock: the command ignored SIGTERM for {}; killing its process group",
                dlock_any::format_duration(grace)
            );
        }
        self.signal(Signal::SIGKILL);
        let _ = self.helper.wait().await;
        self.empty_group().await;
    }

    /// After the helper exited (it sweeps the group itself, unless it was killed):
    /// kills whatever is left, and waits until nothing is (at most a second).
    async fn empty_group(&self) {
        if super::group::members(self.group).is_empty() {
            return;
        }
        eprintln!("dlock: processes of the command's group outlived it; killing them");
        for _ in 0..100 {
            let _ = killpg(self.group, Signal::SIGKILL);
            tokio::time::sleep(Duration::from_millis(10)).await;
            if super::group::members(self.group).is_empty() {
                return;
            }
        }
    }
}
