//! `dlock`'s side of a supervised command: the helper started in a process group of
//! its own (which the command joins), every stop and forwarded signal sent to it as an
//! order (it alone knows the command's whole tree), and the tree found empty before
//! the lock is released.

use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::orders::{Order, OrderSender, on_monotonic_clock};
use super::{helper, tree};

/// The command's process tree, under the helper (see [`helper`]).
pub struct Job {
    helper: Child,
    /// The helper's pid, which is also its process group's.
    group: Pid,
    orders: OrderSender,
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
        // should the helper die, what it supervised is adopted by dlock, which can
        // still find it (by parentage) and stop it
        let _ = nix::sys::prctl::set_child_subreaper(true);
        let orders = OrderSender::new()?;
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
            .arg(orders.path())
            .arg(nanos)
            .arg(millis(graces.death))
            .arg(millis(graces.stop))
            .arg("--")
            .args(command)
            .process_group(0)
            // the lock service's password is dlock's, not the command's
            .env_remove("DLOCK_PASSWORD");
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
            orders,
        })
    }

    /// Tells the helper the lease now lasts until `valid_until`.
    pub fn lease_renewed(&mut self, valid_until: tokio::time::Instant) {
        self.orders.deadline(on_monotonic_clock(valid_until));
    }

    /// Forwards `signal` to the command's process group (through the helper, which
    /// passes it on once the command runs; straight to the group should the helper not
    /// take orders any more).
    pub fn signal(&mut self, signal: Signal) {
        if !self.orders.send(Order::Signal(signal as i32)) {
            let _ = killpg(self.group, signal);
        }
    }

    /// Waits until the command has ended and its tree is empty; the command's exit
    /// code (128+N when signal N ended it).
    ///
    /// # Cancel safety
    /// Dropping it before the helper exited changes nothing; call it again.
    pub async fn wait(&mut self) -> std::io::Result<u8> {
        let status = self.helper.wait().await?;
        self.leftovers().await;
        Ok(helper::code_of(status))
    }

    /// Stops the command's tree: the helper sends SIGTERM to all of it and SIGKILL
    /// after `grace` (`kill_at_once`: at once), or at the lease's deadline
    /// `valid_until` if that comes first. Returns once the tree is empty — stopped here
    /// should the helper not have done it by then (stopped by job control, say).
    pub async fn stop(
        &mut self,
        kill_at_once: bool,
        grace: Duration,
        valid_until: tokio::time::Instant,
    ) {
        let grace = if kill_at_once { Duration::ZERO } else { grace };
        let kill_at = (tokio::time::Instant::now() + grace).min(valid_until);
        let ordered = self.orders.send(Order::Stop(on_monotonic_clock(kill_at)));
        // its SIGKILL rounds take a moment past the kill time
        let done_by = kill_at + Duration::from_millis(500);
        if !ordered
            || tokio::time::timeout_at(done_by, self.helper.wait())
                .await
                .is_err()
        {
            let helper = self.group;
            // (a second at most of SIGKILL rounds: nothing else to do meanwhile)
            tree::stop(helper, None, std::time::Instant::now());
            let _ = kill(helper, Signal::SIGKILL);
            let _ = self.helper.wait().await;
            super::helper::say(
                "the command's supervisor did not stop it in time; stopped its tree here",
            );
        }
        self.leftovers().await;
    }

    /// After the helper exited (it stops the tree itself, unless it was killed): kills
    /// whatever is left — adopted by `dlock` as subreaper, or still in the command's
    /// group — and waits until nothing is, for as long as it takes (a process stuck in
    /// the kernel): the lock, renewed meanwhile, is released only once the tree is
    /// empty.
    async fn leftovers(&self) {
        let me = nix::unistd::getpid();
        let left = || {
            let mut all = tree::descendants(me);
            all.extend(tree::group_members(self.group));
            all
        };
        if left().is_empty() {
            return;
        }
        let mut said: Option<tokio::time::Instant> = None;
        loop {
            for pid in left() {
                let _ = kill(pid, Signal::SIGKILL);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            let still = left();
            if still.is_empty() {
                return;
            }
            if said.is_none_or(|s| s.elapsed() >= Duration::from_secs(10)) {
                said = Some(tokio::time::Instant::now());
                super::helper::say(&format!(
                    "{} process(es) of the command's tree outlive SIGKILL (stuck in the \
                     kernel?): holding the lock until they are gone",
                    still.len()
                ));
            }
        }
    }
}
