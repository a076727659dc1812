//! The helper's view of its process group: who is still in it, stopping them, and
//! reaping them (the helper is the child subreaper of everything the command starts).

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getpid};

/// Reaps every ended child (the command, and the orphans adopted as subreaper); the
/// command's exit code if it was among them (128+N when signal N ended it).
pub fn reap(command: Option<Pid>) -> Option<u8> {
    let mut ended = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if Some(pid) == command => {
                ended = Some(u8::try_from(code & 0xff).unwrap_or(1));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if Some(pid) == command => {
                ended = Some(u8::try_from(128 + (sig as i32 & 0x7f)).unwrap_or(1));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return ended,
            Ok(_) => {}
        }
    }
}

/// SIGTERM to the group, then SIGKILL to whoever is left at `kill_at`, reaping all
/// along; returns once nobody but the helper is left (or after a second of SIGKILLs
/// for processes that cannot die, such as those stuck in the kernel). The command's
/// exit code if it ended meanwhile.
pub fn stop(command: Option<Pid>, kill_at: Instant) -> Option<u8> {
    let mut code = None;
    let _ = killpg(getpgrp(), Signal::SIGTERM);
    // a stopped process acts on SIGTERM only once continued (as systemd does)
    let _ = killpg(getpgrp(), Signal::SIGCONT);
    while Instant::now() < kill_at {
        code = code.or(reap(command));
        if others().is_empty() {
            return code.or(reap(command));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // one by one: SIGKILL to the group would end the helper before it could report
    for _ in 0..200 {
        code = code.or(reap(command));
        let left = others();
        if left.is_empty() {
            break;
        }
        for pid in left {
            let _ = kill(pid, Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    code.or(reap(command))
}

/// The live processes of this helper's group other than itself (zombies excluded:
/// they are gone, only not yet reaped).
pub fn others() -> Vec<Pid> {
    let me = getpid();
    members(getpgrp())
        .into_iter()
        .filter(|&pid| pid != me)
        .collect()
}

/// The live processes of process group `group` (zombies excluded).
pub fn members(group: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // no /proc: only whether the group exists at all can be asked
        return match killpg(group, None) {
            Err(Errno::ESRCH) => Vec::new(),
            _ => vec![group],
        };
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .map(Pid::from_raw)
        .filter(|&pid| live_member(pid, group))
        .collect()
}

/// Whether `pid` is alive (not a zombie) and in process group `group`, from
/// `/proc/PID/stat` (the fields after the command name, which may hold spaces).
fn live_member(pid: Pid, group: Pid) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, after)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = after.split_whitespace();
    let state = fields.next();
    let _parent = fields.next();
    let pgrp = fields.next().and_then(|g| g.parse::<i32>().ok());
    !matches!(state, Some("Z" | "X")) && pgrp == Some(group.as_raw())
}
