//! A fault-suite worker: takes the lock over and over and read-modify-writes the
//! fenced store's counter under it, reporting each step to the store. Run by the
//! fault runner as a separate process, so a kill is a real process kill.
//!
//! `dlock-fault-worker URL NAME STORE_ADDR WORKER_ID TTL_MS HOLD_MS [WORKLOAD]`
//! (`mutex`, `permits:N`, `rw`; readers of a read-write lock only read).

use std::process::ExitCode;
use std::time::Duration;

use std::sync::Arc;

use dlock_any::{DistributedLock, LockError, LockName, SharedLock};
use dlock_faults::Workload;
use dlock_faults::store::mono;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

struct Store {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    w: tokio::net::tcp::OwnedWriteHalf,
}

impl Store {
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
        [_, u, n, s, i, t, h] => (u, n, s, i, t, h, Some(Workload::Mutex)),
        [_, u, n, s, i, t, h, w] => (u, n, s, i, t, h, Workload::parse(w)),
        _ => {
            eprintln!(
                "usage: dlock-fault-worker URL NAME STORE_ADDR WORKER_ID TTL_MS HOLD_MS [WORKLOAD]"
            );
            return ExitCode::from(2);
        }
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
    let Ok(conn) = TcpStream::connect(store).await else {
        eprintln!("cannot reach the store at {store}");
        return ExitCode::from(1);
    };
    let (r, w) = conn.into_split();
    let mut store = Store {
        lines: BufReader::new(r).lines(),
        w,
    };
    let (lock, reads) = loop {
        match locks(url, workload).await {
            Ok(l) => break l,
            Err(e) => {
                eprintln!("worker {id}: connect failed ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    loop {
        // a read-write worker reads three times in four
        let (lock, access) = match &reads {
            Some(r) if !dlock_any::random_u64().is_multiple_of(4) => (r, 'r'),
            Some(_) => (&lock, 'w'),
            None if matches!(workload, Workload::Semaphore(_)) => (&lock, 'p'),
            None => (&lock, 'x'),
        };
        let lease = match lock.acquire(&name, ttl, Duration::from_secs(5)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("worker {id}: acquire failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let now = mono();
        let t = lease.token();
        let valid_until = nanos(now + lease.remaining());
        if store
            .ask(format!(
                "ACQ {id} {t} {} {valid_until} {access}",
                nanos(now)
            ))
            .await
            .is_none()
        {
            return ExitCode::SUCCESS; // the runner is gone
        }
        // The worker never checks its own lease before writing: catching a stale
        // holder is the fence's job, and the unfenced runs show what happens without it.
        if let Some(reply) = store.ask(format!("READ {id} {t} 0")).await
            && let Some(v) = reply
                .strip_prefix("VAL ")
                .and_then(|v| v.parse::<u64>().ok())
        {
            tokio::time::sleep(Duration::from_millis(hold)).await;
            if access != 'r' {
                let _ = store.ask(format!("WRITE {id} {t} {}", v + 1)).await;
            }
        }
        // Report the end of the critical section before releasing: a worker killed
        // between the two must not leave a window open after others could take over.
        let done = mono();
        let _ = store.ask(format!("REL {id} {t} {}", nanos(done))).await;
        let _ = lock.release(&lease).await;
    }
}

/// The lock a worker takes (the mutex, a permit, or a read-write lock's write side)
/// and, for a read-write worker, its read side.
async fn locks(
    url: &str,
    workload: Workload,
) -> Result<(Arc<dyn DistributedLock>, Option<Arc<dyn DistributedLock>>), LockError> {
    if workload == Workload::Mutex {
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
