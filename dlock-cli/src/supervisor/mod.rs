//! The command `dlock run` and `dlock elect` guard is a process *tree*, not a pid.
//!
//! ```text
//! dlock ──(parent-death signal)──▶ helper (`dlock __supervise`, leads group G)
//!                                    └─ COMMAND ─ its children … (all in group G)
//! ```
//!
//! - The helper leads a process group of its own; the command and everything it
//!   starts join it. Every stop `dlock` makes — lease lost, `--max-hold`, the SIGKILL
//!   after `--grace`, the signals it forwards — goes to the whole group.
//! - When `dlock` dies, by any signal, SIGKILL included, the kernel tells the helper
//!   (`PR_SET_PDEATHSIG`), which stops the group within the death grace: well before
//!   the lease that nobody renews any more can expire and another host take the lock.
//! - When the command exits, whatever it left running in its group is stopped before
//!   the lock is released.
//! - A process that leaves the group on purpose (`setsid`, a daemon's double fork)
//!   escapes all of this; the `run` help and `docs/cli.md` say so.

pub mod deadline;
pub mod group;
pub mod helper;
pub mod job;
pub mod terminal;

pub use job::{Graces, Job};
