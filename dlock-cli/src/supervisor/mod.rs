//! The command `dlock run` and `dlock elect` guard is a process *tree*, not a pid.
//!
//! ```text
//! dlock ──(parent-death signal, orders)──▶ helper (`dlock __supervise`, subreaper)
//!                                            └─ COMMAND ─ its descendants …
//! ```
//!
//! - The helper is the child subreaper of everything the command starts: every
//!   descendant stays in its tree by parentage, whatever process group or session it
//!   moves to (GNU `timeout`, a shell's job control, `setsid`, a daemon's double fork).
//!   Every stop — lease lost, `--max-hold`, the SIGKILL after `--grace` — goes to the
//!   whole tree; the signals `dlock` forwards go to the command's process group, as a
//!   terminal's would.
//! - When `dlock` dies, by any signal, SIGKILL included, the kernel tells the helper
//!   (`PR_SET_PDEATHSIG`), which stops the tree by the earlier of the death grace and
//!   the lease's deadline: before the lease that nobody renews any more can expire and
//!   another host take the lock.
//! - When the command exits, whatever it left running is stopped before the lock is
//!   released.
//! - What still escapes: a process another one starts for it (a service manager's
//!   daemon: `systemctl start`, `at`), and one it cannot signal (a setuid program
//!   run by another user); the `run` help and `docs/cli.md` say so.

pub mod helper;
pub mod job;
pub mod orders;
pub mod terminal;
pub mod tree;

pub use job::{Graces, Job};
