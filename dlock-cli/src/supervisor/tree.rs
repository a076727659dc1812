//! The command's process tree, by parentage: every live process whose chain of parents
//! leads to the helper, whatever its process group or session. The helper is the
//! child subreaper, so a process whose parent dies is adopted by the helper and stays
//! in the tree; GNU `timeout`, a shell's job control (`set -m`) and `setsid` move
//! processes out of the command's group, not out of its tree. What leaves it: a
//! process started by another (a service manager: `systemctl start`, `at`), or one
//! whose user is another (a setuid program), which cannot be signalled.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

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

/// Stops the tree under `root` (the helper itself, or what `dlock` finds under a
/// helper it lost): SIGTERM (and SIGCONT: a stopped process acts on it only once
/// continued, as systemd does) to every process in it, and to every one that appears
/// until it is empty or `kill_at`; then SIGKILL to whoever is left, round after round,
/// as killed parents' children are adopted. Reaps along the way when `root` is this
/// process. Returns once the tree is empty, or after a second of SIGKILLs for processes
/// that cannot die (stuck in the kernel, or another user's); the command's exit code
/// if it ended meanwhile.
pub fn stop(root: Pid, command: Option<Pid>, kill_at: Instant) -> Option<u8> {
    let mine = root == nix::unistd::getpid();
    let mut code = None;
    let reaped = |code: &mut Option<u8>| {
        if mine {
            *code = code.or(reap(command));
        }
    };
    let mut told = HashSet::new();
    let began = Instant::now();
    while Instant::now() < kill_at {
        reaped(&mut code);
        let left = descendants(root);
        if left.is_empty() {
            reaped(&mut code);
            return code;
        }
        for pid in left {
            if told.insert(pid) {
                let _ = kill(pid, Signal::SIGTERM);
                let _ = kill(pid, Signal::SIGCONT);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let stubborn = !told.is_empty() && !descendants(root).is_empty();
    for _ in 0..200 {
        reaped(&mut code);
        let left = descendants(root);
        if left.is_empty() {
            break;
        }
        for pid in left {
            let _ = kill(pid, Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    reaped(&mut code);
    if stubborn {
        super::helper::say(&format!(
            "the command's process tree ignored SIGTERM for {}; killed it",
            dlock_any::format_duration(began.elapsed())
        ));
    }
    code
}

/// The live processes (zombies excluded: they are gone, only not yet reaped) whose
/// chain of parents leads to `root`, `root` excluded; empty without `/proc`.
pub fn descendants(root: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for pid in entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
    {
        if let Some((parent, live)) = parent_of(pid) {
            children
                .entry(parent)
                .or_default()
                .push(if live { pid } else { -pid });
        }
    }
    // a zombie's children were adopted already (walking it finds none), but a process
    // whose main thread exited while others run reads as one too, with its children
    let mut found = Vec::new();
    let mut next = vec![root.as_raw()];
    while let Some(pid) = next.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if child > 0 {
                found.push(Pid::from_raw(child));
            }
            next.push(child.abs());
        }
    }
    found
}

/// `pid`'s parent and whether it is alive (not a zombie), from `/proc/PID/stat` (the
/// fields after the command name, which may hold spaces).
fn parent_of(pid: i32) -> Option<(i32, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    let mut fields = after.split_whitespace();
    let state = fields.next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((parent, !matches!(state, "Z" | "X") || has_live_thread(pid)))
}

/// Whether a process that reads as a zombie still runs threads: its main thread
/// exited (`pthread_exit`), the others did not — it is alive, and signals reach it.
fn has_live_thread(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).any(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, after)| after.split_whitespace().next())
                .is_some_and(|state| !matches!(state, "Z" | "X"))
        })
    })
}

/// The live processes of process group `group` (zombies excluded): what `dlock` can
/// still find of a helper's command when the helper itself is gone.
pub fn group_members(group: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| in_group(pid, group))
        .map(Pid::from_raw)
        .collect()
}

fn in_group(pid: i32, group: Pid) -> bool {
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
    pgrp == Some(group.as_raw()) && (!matches!(state, Some("Z" | "X")) || has_live_thread(pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_found_by_parentage_whatever_its_groups() {
        use std::os::unix::process::CommandExt;
        // a shell in a group of its own, a child of it in a session of its own
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & sleep 30; wait"])
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let root = Pid::from_raw(i32::try_from(sh.id()).unwrap());
        let sessions_of = |under: &[Pid]| -> HashSet<Pid> {
            under
                .iter()
                .filter_map(|&p| nix::unistd::getsid(Some(p)).ok())
                .collect()
        };
        // both forked, and the first one through setsid(2) (it is forked before)
        let end = Instant::now() + Duration::from_secs(5);
        let mut under = descendants(root);
        while (under.len() < 2 || sessions_of(&under).len() < 2) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
            under = descendants(root);
        }
        assert_eq!(under.len(), 2, "{under:?}");
        assert_eq!(sessions_of(&under).len(), 2, "one of them left the session");
        assert!(descendants(nix::unistd::getpid()).contains(&root));
        stop(root, None, Instant::now());
        assert!(descendants(root).is_empty());
        let _ = kill(root, Signal::SIGKILL);
        let _ = sh.wait();
    }

    /// A process whose main thread exited while another runs reads as a zombie, yet
    /// lives: it is in the tree, and stopped with it.
    #[test]
    fn a_process_without_its_main_thread_is_still_in_the_tree() {
        let dir = std::env::temp_dir().join(format!("dlock-tree-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = dir.join("headless.c");
        std::fs::write(
            &source,
            "#include <pthread.h>\n#include <unistd.h>\n\
             static void *run(void *a) { (void)a; for (;;) sleep(1); return 0; }\n\
             int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_exit(0); }\n",
        )
        .unwrap();
        let program = dir.join("headless");
        let built = std::process::Command::new("cc")
            .args(["-pthread", "-o"])
            .arg(&program)
            .arg(&source)
            .status()
            .unwrap();
        assert!(built.success());
        // under a shell of its own, so that stopping the shell's tree touches no other
        // test's processes
        let mut sh = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{} & wait", program.display()))
            .spawn()
            .unwrap();
        let root = Pid::from_raw(i32::try_from(sh.id()).unwrap());
        let end = Instant::now() + Duration::from_secs(5);
        let headless = loop {
            let zombie_looking = descendants(root).into_iter().find(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| s.contains(") Z "))
            });
            if let Some(p) = zombie_looking {
                break p;
            }
            assert!(
                Instant::now() < end,
                "the main thread never exited (or was left out)"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        stop(root, None, Instant::now());
        assert!(!descendants(root).contains(&headless));
        let _ = kill(root, Signal::SIGKILL);
        let _ = sh.wait();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
