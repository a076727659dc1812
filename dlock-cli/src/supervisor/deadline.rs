//! The lease's deadline, from `dlock` to the helper: a pipe of `CLOCK_MONOTONIC`
//! instants (8 bytes each, little-endian nanoseconds), the lease's `valid_until` after
//! every renewal. The helper stops the command's group before the last one it got, so
//! the command cannot run past its lease even while `dlock` is stopped (SIGSTOP,
//! swapped out, starved) and cannot renew; and the pipe's end of file says `dlock` is
//! gone, whatever thread it spawned from.
//!
//! The helper opens the pipe's read end through `/proc/<dlock>/fd/<n>` (no descriptor
//! crosses `exec`, so the command cannot inherit one that would keep the pipe open).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::{Pid, pipe2};

/// Now on `CLOCK_MONOTONIC`, the clock every process on the machine shares.
pub fn monotonic_now() -> Duration {
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(Duration::ZERO, Duration::from)
}

/// `instant` (a tokio or std monotonic instant) on `CLOCK_MONOTONIC`.
pub fn on_monotonic_clock(instant: tokio::time::Instant) -> Duration {
    monotonic_now() + instant.saturating_duration_since(tokio::time::Instant::now())
}

/// `dlock`'s end: it writes deadlines, and keeps the read end open for the helper to
/// open through `/proc`.
pub struct DeadlineSender {
    read: OwnedFd,
    write: File,
    last: Option<Duration>,
}

impl DeadlineSender {
    /// A new pipe (both ends close on exec; the write end never blocks).
    ///
    /// # Errors
    /// When no pipe can be made.
    pub fn new() -> std::io::Result<Self> {
        let (read, write) = pipe2(OFlag::O_CLOEXEC)?;
        fcntl(&write, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        Ok(Self {
            read,
            write: File::from(write),
            last: None,
        })
    }

    /// Where the helper opens the read end.
    pub fn path(&self) -> String {
        format!("/proc/{}/fd/{}", std::process::id(), self.read.as_raw_fd())
    }

    /// Sends `deadline` (on `CLOCK_MONOTONIC`) unless it is the one sent last. A full
    /// pipe (a helper that does not read) drops it: the helper then stops the command
    /// by the older deadline, which is the safe way to be wrong.
    pub fn send(&mut self, deadline: Duration) {
        if self.last == Some(deadline) {
            return;
        }
        let nanos = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
        if self.write.write_all(&nanos.to_le_bytes()).is_ok() {
            self.last = Some(deadline);
        }
    }
}

/// The helper's end.
pub struct DeadlineReceiver {
    pipe: File,
    partial: Vec<u8>,
}

/// What reading the pipe found.
pub enum Heard {
    /// The newest deadline, if any arrived.
    Deadline(Option<Duration>),
    /// `dlock` closed its end: it is gone.
    Gone,
}

impl DeadlineReceiver {
    /// Opens `dlock`'s pipe at `path`, checking it belongs to `parent`.
    ///
    /// # Errors
    /// When it cannot be opened (`dlock` is already gone, or `/proc` is hidden).
    pub fn open(path: &str, parent: Pid) -> std::io::Result<Self> {
        if !path.starts_with(&format!("/proc/{parent}/fd/")) {
            return Err(std::io::Error::other("not dlock's pipe"));
        }
        let pipe = File::open(path)?;
        fcntl(&pipe, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        Ok(Self {
            pipe,
            partial: Vec::new(),
        })
    }

    /// The pipe, to poll.
    pub fn file(&self) -> &File {
        &self.pipe
    }

    /// Reads what is there without blocking.
    pub fn read(&mut self) -> Heard {
        let mut newest = None;
        let mut buf = [0u8; 512];
        loop {
            match self.pipe.read(&mut buf) {
                Ok(0) => return Heard::Gone,
                Ok(n) => {
                    self.partial.extend_from_slice(&buf[..n]);
                    let whole = self.partial.len() / 8 * 8;
                    for chunk in self.partial[..whole].chunks_exact(8) {
                        let mut bytes = [0u8; 8];
                        bytes.copy_from_slice(chunk);
                        newest = Some(Duration::from_nanos(u64::from_le_bytes(bytes)));
                    }
                    self.partial.drain(..whole);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Heard::Deadline(newest),
            }
        }
    }
}
