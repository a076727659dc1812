//! The controlling terminal, handed to the command's process group while it runs when
//! `dlock` had it in the foreground: the command can read it, and Ctrl-C reaches it
//! (a process group of its own is otherwise a background job).

use nix::sys::signal::{SigSet, Signal};
use nix::unistd::{Pid, getpgid, getpgrp, getppid, isatty, tcgetpgrp, tcsetpgrp};

/// The foreground group to give the terminal back to, if it was taken.
pub struct Terminal {
    previous: Option<Pid>,
}

impl Terminal {
    /// Takes the terminal on stdin for this process's group if `dlock`'s group has it.
    pub fn take() -> Self {
        let stdin = std::io::stdin();
        let parent_group = getpgid(Some(getppid())).ok();
        let previous = match (isatty(&stdin), tcgetpgrp(&stdin)) {
            (Ok(true), Ok(fg)) if Some(fg) == parent_group => {
                without_ttou(|| tcsetpgrp(&stdin, getpgrp()))
                    .ok()
                    .map(|()| fg)
            }
            _ => None,
        };
        Self { previous }
    }

    /// Gives the terminal back to the group that had it.
    pub fn give_back(self) {
        if let Some(fg) = self.previous {
            let _ = without_ttou(|| tcsetpgrp(std::io::stdin(), fg));
        }
    }
}

/// Runs `f` with SIGTTOU blocked: a background group that changes the terminal's
/// foreground group is sent SIGTTOU, which would stop it (or, with a handler, make the
/// call start over for ever). Unblocked again before anything is spawned, so the
/// command never inherits the mask.
fn without_ttou<T>(f: impl FnOnce() -> T) -> T {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let blocked = ttou.thread_block().is_ok();
    let out = f();
    if blocked {
        let _ = ttou.thread_unblock();
    }
    out
}
