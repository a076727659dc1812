//! The fenced store: a tiny TCP service holding one counter, logging every request.
//! All times are the machine's `CLOCK_MONOTONIC`, shared by every process: workers
//! stamp their own acquisitions, validity deadlines and releases, the store stamps
//! reads and writes as it serves them.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::workload::{Fence, Workload};

/// `d` in nanoseconds.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The machine's monotonic clock (the same in every process).
#[must_use]
pub fn mono() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(Duration::ZERO, Duration::from)
}

/// What a worker told the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Got the lock at `at` (worker's stamp); `n` = its `valid_until` in nanoseconds.
    Acquired,
    /// Read the counter under `token`; `n` = the value read.
    Read,
    /// Wrote `n` under `token`.
    Write,
    /// Called release at `at` (worker's stamp).
    Released,
    /// The worker's election observer reported leader epoch `token` at `at`.
    Observed,
    /// A runner (`token`) of request number `n` applied its effect (`access` `n`),
    /// found an earlier runner's (`f`), or was refused by the fence (not accepted).
    Effect,
    /// A caller of request number `n` got its result, the effect's token in `token`:
    /// `access` `R` ran it, `D` found it done; `S` (not accepted) its run was refused.
    Result,
}

/// One logged request.
#[derive(Clone, Debug)]
pub struct Event {
    /// When it happened, on the machine's monotonic clock.
    pub at: Duration,
    /// The worker.
    pub worker: u32,
    /// What happened.
    pub kind: Kind,
    /// The fencing token the worker carried.
    pub token: u64,
    /// Value read or written, or `valid_until` in nanoseconds (Acquired).
    pub n: u64,
    /// Whether the store accepted it (reads and writes can be fenced off).
    pub accepted: bool,
    /// For `Acquired`: how the lock is held — `x` mutex, `p` permit, `r` read, `w`
    /// write, `l` leadership.
    pub access: char,
}

struct State {
    value: u64,
    fence: Fence,
    log: Vec<Event>,
}

/// The counter and its log. With `fenced`, a read or write that the workload's
/// [`Fence`] finds stale is rejected (for the mutex: a token below the highest seen;
/// reads register their token too, so a holder that read under a newer token fences off
/// an older holder's later write).
pub struct FencedStore {
    addr: String,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl FencedStore {
    /// Listens on a free loopback port.
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn start(fenced: bool, workload: Workload) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let state = Arc::new(Mutex::new(State {
            value: 0,
            fence: Fence::new(workload),
            log: Vec::new(),
        }));
        let st = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, Arc::clone(&st), fenced));
            }
        });
        Ok(Self { addr, state, task })
    }

    /// Where workers connect.
    #[must_use]
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Now, on the log's clock.
    #[must_use]
    pub fn now(&self) -> Duration {
        mono()
    }

    /// A copy of the log so far.
    #[must_use]
    pub fn log(&self) -> Vec<Event> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .log
            .clone()
    }

    /// The final counter value.
    #[must_use]
    pub fn value(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .value
    }
}

impl Drop for FencedStore {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(conn: TcpStream, state: Arc<Mutex<State>>, fenced: bool) {
    let (r, mut w) = conn.into_split();
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| {
            parts
                .get(i)
                .and_then(|p| p.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // ACQ id token at_ns valid_until_ns [access] | REL id token at_ns (at_ns `-`: stamp
        // it here, and ACQ's valid_until_ns is time left) | READ id token
        // | WRITE id token value | OBS id epoch at_ns; what the backend's own store
        // answered, logged as is: RREAD/RWRITE id token value 1|0 | EFF id token request
        // n|f|- | RES id effect_token request R|D|S
        let (worker, token, n) = (u32::try_from(num(1)).unwrap_or(0), num(2), num(3));
        let reply = {
            let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
            let served = mono();
            let stale = |write: bool| fenced && !s.fence.admits(token, write);
            // a worker on a faked clock leaves the stamp to the store (`-`), and gives
            // its validity as time left
            let unstamped = parts.get(3) == Some(&"-");
            let stamped = if unstamped {
                served
            } else {
                Duration::from_nanos(n)
            };
            let (kind, accepted, reply, at) = match parts.first().copied() {
                Some("ACQ") => (Kind::Acquired, true, "OK".to_owned(), stamped),
                Some("REL") => (Kind::Released, true, "OK".to_owned(), stamped),
                Some("OBS") => (Kind::Observed, true, "OK".to_owned(), stamped),
                Some("RREAD") => (Kind::Read, num(4) == 1, "OK".to_owned(), served),
                Some("RWRITE") => (Kind::Write, num(4) == 1, "OK".to_owned(), served),
                Some("EFF") => (
                    Kind::Effect,
                    parts.get(4) != Some(&"-"),
                    "OK".to_owned(),
                    served,
                ),
                Some("RES") => (
                    Kind::Result,
                    parts.get(4) != Some(&"S"),
                    "OK".to_owned(),
                    served,
                ),
                Some("READ") if stale(false) => (Kind::Read, false, "REJ".to_owned(), served),
                Some("READ") => {
                    s.fence.record(token, false);
                    (Kind::Read, true, format!("VAL {}", s.value), served)
                }
                Some("WRITE") if stale(true) => (Kind::Write, false, "REJ".to_owned(), served),
                Some("WRITE") => {
                    s.fence.record(token, true);
                    s.value = n;
                    (Kind::Write, true, "OK".to_owned(), served)
                }
                _ => continue,
            };
            let own = matches!(parts.first().copied(), Some("RREAD" | "RWRITE"));
            let n = match kind {
                Kind::Read if accepted && !own => s.value,
                Kind::Acquired if unstamped => nanos(served) + num(4),
                Kind::Acquired => num(4),
                _ => n,
            };
            let access = match kind {
                Kind::Acquired => parts.get(5).and_then(|a| a.chars().next()).unwrap_or('x'),
                Kind::Effect | Kind::Result => {
                    parts.get(4).and_then(|a| a.chars().next()).unwrap_or('x')
                }
                _ => 'x',
            };
            s.log.push(Event {
                at,
                worker,
                kind,
                token,
                n,
                accepted,
                access,
            });
            reply
        };
        if w.write_all(format!("{reply}\n").as_bytes()).await.is_err() {
            return;
        }
    }
}
