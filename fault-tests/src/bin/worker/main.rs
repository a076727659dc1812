//! A fault-suite worker: takes the lock over and over and read-modify-writes the
//! fenced store's counter under it, reporting each step to the store. Run by the
//! fault runner as a separate process, so a kill is a real process kill.
//!
//! `dlock-fault-worker URL NAME STORE_ADDR WORKER_ID TTL_MS HOLD_MS [WORKLOAD]`
//! (`mutex`, `permits:N`, `rw`, `election`, `own-store`, `once`; readers of a
//! read-write lock only read; an election worker campaigns, leads for one update,
//! resigns, and reports every leader change its observer sees; `own-store` and `once`
//! write to the backend's own store instead, see `own.rs`).

mod own;

/// The suffix of a workload that runs without the fence (the control runs).
const UNFENCED: &str = ":unfenced";

use std::process::ExitCode;
use std::time::Duration;

use std::sync::Arc;

use dlock_any::{DistributedLock, Election, Lease, LockError, LockName, SharedLock};
use dlock_faults::Workload;
use dlock_faults::store::mono;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

struct Store {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    w: tokio::net::tcp::OwnedWriteHalf,
    /// The speed of this process's clocks under a clock rate drill
    /// (`DLOCK_FAULTS_CLOCK_RATE`, set by the runner, which fakes them).
    clock_rate: Option<f64>,
}

impl Store {
    async fn connect(addr: &str) -> Option<Self> {
        let (r, w) = TcpStream::connect(addr).await.ok()?.into_split();
        Some(Self {
            lines: BufReader::new(r).lines(),
            w,
            clock_rate: std::env::var("DLOCK_FAULTS_CLOCK_RATE")
                .ok()
                .and_then(|r| r.parse().ok())
                .filter(|r: &f64| *r > 0.0),
        })
    }

    /// One critical section under `lease`, reported step by step: acquired (with its
    /// validity), read, hold, write (unless reading), released. `false` when the
    /// runner is gone.
    async fn update(&mut self, id: &str, lease: &Lease, access: char, hold: u64) -> bool {
        let now = mono();
        let t = lease.token();
        let hold = Duration::from_millis(hold);
        let acquired = match self.clock_rate {
            Some(rate) => {
                // This clock is faked, so it cannot stamp the shared log: the store
                // stamps the grant as it gets it (`-`), with the deadline this worker
                // believes in, converted to true time.
                let believed = Duration::try_from_secs_f64(lease.remaining().as_secs_f64() / rate)
                    .unwrap_or(Duration::MAX);
                format!("ACQ {id} {t} - {} {access}", nanos(believed))
            }
            None => {
                let valid_until = nanos(now + lease.remaining());
                format!("ACQ {id} {t} {} {valid_until} {access}", nanos(now))
            }
        };
        if self.ask(acquired).await.is_none() {
            return false;
        }
        // The worker never checks its own lease before writing: catching a stale
        // holder is the fence's job, and the unfenced runs show what happens without it.
        if let Some(reply) = self.ask(format!("READ {id} {t} 0")).await
            && let Some(v) = reply
                .strip_prefix("VAL ")
                .and_then(|v| v.parse::<u64>().ok())
        {
            // under a clock rate the worker works until its lease's deadline, as a user
            // who trusts the lease to the last moment would
            let hold = match self.clock_rate {
                Some(_) => lease.remaining().saturating_sub(Duration::from_millis(5)),
                None => hold,
            };
            tokio::time::sleep(hold).await;
            if access != 'r' {
                let _ = self.ask(format!("WRITE {id} {t} {}", v + 1)).await;
            }
        }
        // Report the end of the critical section before releasing: a worker killed
        // between the two must not leave a window open after others could take over.
        let done = match self.clock_rate {
            Some(_) => "-".to_owned(),
            None => nanos(mono()).to_string(),
        };
        let _ = self.ask(format!("REL {id} {t} {done}")).await;
        true
    }

    async fn ask(&mut self, msg: String) -> Option<String> {
        self.w.write_all(format!("{msg}\n").as_bytes()).await.ok()?;
        self.lines.next_line().await.ok()?
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (url, name, store, id, ttl_ms, hold_ms, workload) = match args.as_slice() {
        [_, u, n, s, i, t, h] => (u, n, s, i, t, h, "mutex"),
        [_, u, n, s, i, t, h, w] => (u, n, s, i, t, h, w.as_str()),
        _ => {
            eprintln!(
                "usage: dlock-fault-worker URL NAME STORE_ADDR WORKER_ID TTL_MS HOLD_MS [WORKLOAD]"
            );
            return ExitCode::from(2);
        }
    };
    // the workloads on the backend's own store can run without the fence (the controls)
    let (workload, fenced) = match workload.strip_suffix(UNFENCED) {
        Some(w) => (Workload::parse(w), false),
        None => (Workload::parse(workload), true),
    };
    let (Ok(name), Ok(ttl), Ok(hold), Some(workload)) = (
        LockName::new(name),
        ttl_ms.parse::<u64>(),
        hold_ms.parse::<u64>(),
        workload,
    ) else {
        eprintln!("bad arguments");
        return ExitCode::from(2);
    };
    let ttl = Duration::from_millis(ttl);
    let Some(mut store) = Store::connect(store).await else {
        eprintln!("cannot reach the store at {store}");
        return ExitCode::from(1);
    };
    if matches!(workload, Workload::OwnStore | Workload::Once) {
        let hold = Duration::from_millis(hold);
        let worker = own::Worker {
            url,
            name: &name,
            id,
            ttl,
            hold,
            fenced,
        };
        return match workload {
            Workload::OwnStore => worker.counter(store).await,
            _ => worker.once(store).await,
        };
    }
    let (lock, reads) = loop {
        match locks(url, workload).await {
            Ok(l) => break l,
            Err(e) => {
                eprintln!("worker {id}: connect failed ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    if workload == Workload::Election {
        let Some(observed) = Store::connect(&args[3]).await else {
            return ExitCode::from(1);
        };
        return lead(lock, &name, store, observed, id, ttl, hold).await;
    }
    // Under a clock step the workers ask again and again instead of waiting for a
    // wake-up, as newcomers would: a lease that the step ended early is then taken at
    // once, not when the waiters' timers (set by the true clock) come due.
    let poll = std::env::var("DLOCK_FAULTS_POLL_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis);
    // `DLOCK_FAULTS_SOLE_WRITER=ID`: only that read-write worker writes (every other
    // turn), the others only read — the paused-writer fault's mix
    let sole_writer = std::env::var("DLOCK_FAULTS_SOLE_WRITER").ok();
    loop {
        // a read-write worker reads three times in four
        let reads_now = match &sole_writer {
            Some(w) => w != id || dlock_any::random_u64().is_multiple_of(2),
            None => !dlock_any::random_u64().is_multiple_of(4),
        };
        let (lock, access) = match &reads {
            Some(r) if reads_now => (r, 'r'),
            Some(_) => (&lock, 'w'),
            None if matches!(workload, Workload::Semaphore(_)) => (&lock, 'p'),
            None => (&lock, 'x'),
        };
        let taken = match poll {
            Some(every) => poll_until_taken(lock, &name, ttl, every).await,
            None => lock.acquire(&name, ttl, Duration::from_secs(5)).await,
        };
        let lease = match taken {
            Ok(l) => l,
            Err(e) => {
                eprintln!("worker {id}: acquire failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if !store.update(id, &lease, access, hold).await {
            return ExitCode::SUCCESS; // the runner is gone
        }
        let _ = lock.release(&lease).await;
    }
}

/// `try_acquire` every `every` until it gives a lease (or fails).
async fn poll_until_taken(
    lock: &Arc<dyn DistributedLock>,
    name: &LockName,
    ttl: Duration,
    every: Duration,
) -> Result<Lease, LockError> {
    loop {
        if let Some(lease) = lock.try_acquire(name, ttl).await? {
            return Ok(lease);
        }
        tokio::time::sleep(every).await;
    }
}

/// The election worker: campaigns, makes one update as leader, resigns; meanwhile its
/// observer reports every leader it sees on a connection of its own.
async fn lead(
    lock: Arc<dyn DistributedLock>,
    name: &LockName,
    mut store: Store,
    mut observed: Store,
    id: &str,
    ttl: Duration,
    hold: u64,
) -> ExitCode {
    let Ok(election) = Election::new(lock, name.as_str()) else {
        return ExitCode::from(2);
    };
    let election = election.with_ttl(ttl);
    let mut changes = election.observe();
    let observer_id = id.to_owned();
    tokio::spawn(async move {
        loop {
            match changes.next().await {
                Ok(Some(l)) => {
                    let msg = format!("OBS {observer_id} {} {}", l.epoch, nanos(mono()));
                    if observed.ask(msg).await.is_none() {
                        return;
                    }
                }
                Ok(None) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    });
    let me = format!("worker-{id}");
    loop {
        let leadership = match election.campaign_for(&me, Duration::from_secs(5)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("worker {id}: campaign failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let lease = leadership.guard().lease();
        if !store.update(id, &lease, 'l', hold).await {
            return ExitCode::SUCCESS;
        }
        let _ = leadership.resign().await;
    }
}

/// The lock a worker takes (the mutex, a permit, or a read-write lock's write side)
/// and, for a read-write worker, its read side.
async fn locks(
    url: &str,
    workload: Workload,
) -> Result<(Arc<dyn DistributedLock>, Option<Arc<dyn DistributedLock>>), LockError> {
    if matches!(workload, Workload::Mutex | Workload::Election) {
        return Ok((dlock_any::connect(url).await?, None));
    }
    let backend = dlock_any::connect_coordination(url).await?;
    Ok(match workload {
        Workload::Semaphore(n) => (Arc::new(SharedLock::permits(backend, n)?), None),
        _ => (
            Arc::new(SharedLock::writes(Arc::clone(&backend))),
            Some(Arc::new(SharedLock::reads(backend)) as Arc<dyn DistributedLock>),
        ),
    })
}
