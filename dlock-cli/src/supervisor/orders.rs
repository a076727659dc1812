//! What `dlock` tells the helper, through a pipe: the lease's deadline after every
//! renewal (a `CLOCK_MONOTONIC` instant), a signal to forward to the command, or to
//! stop the command's tree now. Each order is 16 bytes: its kind and its value, both
//! little-endian `u64`. The helper stops the tree before the last deadline it got, so
//! the command cannot run past its lease even while `dlock` is stopped (SIGSTOP,
//! swapped out, starved) and cannot renew; the pipe's end of file says `dlock` is
//! gone, whatever thread it spawned from. Orders sent before the helper has started
//! the command wait in the pipe, so a signal forwarded then reaches the command once it
//! runs (the helper reads the pipe only after it has started it).
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

/// One order from `dlock` to the helper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The lease holds until then (on `CLOCK_MONOTONIC`).
    Deadline(Duration),
    /// Forward this signal to the command's process group.
    Signal(i32),
    /// Stop the command's tree now: SIGTERM, and SIGKILL at this instant (or the
    /// deadline, if earlier).
    Stop(Duration),
}

impl Order {
    fn encode(self) -> [u8; 16] {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let (kind, value) = match self {
            Self::Deadline(d) => (1u64, nanos(d)),
            Self::Signal(s) => (2, u64::try_from(s).unwrap_or(0)),
            Self::Stop(d) => (3, nanos(d)),
        };
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&kind.to_le_bytes());
        out[8..].copy_from_slice(&value.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(bytes.get(i..i + 8)?.try_into().ok()?))
        };
        let value = word(8)?;
        match word(0)? {
            1 => Some(Self::Deadline(Duration::from_nanos(value))),
            2 => Some(Self::Signal(i32::try_from(value).ok()?)),
            3 => Some(Self::Stop(Duration::from_nanos(value))),
            _ => None,
        }
    }
}

/// `dlock`'s end: it writes orders, and keeps the read end open for the helper to
/// open through `/proc`.
pub struct OrderSender {
    read: OwnedFd,
    write: File,
    last: Option<Duration>,
}

impl OrderSender {
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
    pub fn deadline(&mut self, deadline: Duration) {
        if self.last == Some(deadline) {
            return;
        }
        if self.send(Order::Deadline(deadline)) {
            self.last = Some(deadline);
        }
    }

    /// Sends `order`; `false` when the pipe is full or gone (the helper does not read).
    pub fn send(&mut self, order: Order) -> bool {
        self.write.write_all(&order.encode()).is_ok()
    }
}

/// The helper's end.
pub struct OrderReceiver {
    pipe: File,
    partial: Vec<u8>,
}

/// What reading the pipe found.
pub enum Heard {
    /// The orders that arrived, oldest first (perhaps none).
    Orders(Vec<Order>),
    /// `dlock` closed its end: it is gone (after these orders).
    Gone(Vec<Order>),
}

impl OrderReceiver {
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
        let mut orders = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            match self.pipe.read(&mut buf) {
                Ok(0) => return Heard::Gone(orders),
                Ok(n) => {
                    self.partial.extend_from_slice(&buf[..n]);
                    let whole = self.partial.len() / 16 * 16;
                    orders.extend(
                        self.partial[..whole]
                            .chunks_exact(16)
                            .filter_map(Order::decode),
                    );
                    self.partial.drain(..whole);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Heard::Orders(orders),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_read_back() {
        for order in [
            Order::Deadline(Duration::from_nanos(123_456_789_012)),
            Order::Signal(15),
            Order::Stop(Duration::from_secs(7)),
        ] {
            assert_eq!(Order::decode(&order.encode()), Some(order));
        }
        assert_eq!(Order::decode(&[9; 16]), None);
    }
}
