//! A fault-suite worker: takes the lock over and over and read-modify-writes the
//! fenced store's counter under it, reporting each step to the store. Run by the
//! fault runner as a separate process, so a kill is a real process kill.
//!
//! `dlock-fault-worker URL NAME STORE_ADDR WORKER_ID TTL_MS HOLD_MS`

use std::process::ExitCode;
use std::time::Duration;

use dlock_any::{LockName, connect};
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
    let [_, url, name, store, id, ttl_ms, hold_ms] = args.as_slice() else {
        eprintln!("usage: dlock-fault-worker URL NAME STORE_ADDR WORKER_ID TTL_MS HOLD_MS");
        return ExitCode::from(2);
    };
    let (Ok(name), Ok(ttl), Ok(hold)) = (
        LockName::new(name),
        ttl_ms.parse::<u64>(),
        hold_ms.parse::<u64>(),
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
    let lock = loop {
        match connect(url).await {
            Ok(l) => break l,
            Err(e) => {
                eprintln!("worker {id}: connect failed ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    loop {
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
            .ask(format!("ACQ {id} {t} {} {valid_until}", nanos(now)))
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
            let _ = store.ask(format!("WRITE {id} {t} {}", v + 1)).await;
        }
        // Report the end of the critical section before releasing: a worker killed
        // between the two must not leave a window open after others could take over.
        let done = mono();
        let _ = store.ask(format!("REL {id} {t} {}", nanos(done))).await;
        let _ = lock.release(&lease).await;
    }
}
