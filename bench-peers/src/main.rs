//! # dlock-bench-peers
//!
//! Runs `dlock bench`'s uncontended, hand-off and contended scenarios (the same code,
//! from the `dlock-bench` library) against peer clients and against dlock on the same
//! server, alternating between the two, and prints a Markdown table with the ratio
//! dlock ÷ peer. Start the servers first:
//!
//! ```text
//! eval "$(scripts/services up --cluster)"
//! cargo run --release -p dlock-bench-peers
//! ```
//!
//! Peers: rslock 0.10 (Redis, one node and Redlock over five), etcd-client's
//! `lock`/`unlock`, zookeeper-client's lock recipe, sqlx's `PgAdvisoryLock`. None of
//! them offers a fencing token; `PgAdvisoryLock` has no TTL either.

mod peers;

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, LockError};
use dlock_bench::scenarios;
use dlock_bench::stats::Samples;

type Client = Arc<dyn DistributedLock>;

/// Makes a new client of a peer.
type MakePeer = Box<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Result<Client, LockError>>>>>;

/// How to make a fresh client of dlock or of the peer.
struct Pair {
    label: &'static str,
    dlock_url: String,
    peer: MakePeer,
}

fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

fn pairs() -> Vec<Pair> {
    let mut out = Vec::new();
    if let Some(url) = env("DLOCK_TEST_REDIS_URL") {
        let u = url.clone();
        out.push(Pair {
            label: "Redis — rslock",
            dlock_url: url,
            peer: Box::new(move || {
                let u = u.clone();
                Box::pin(async move {
                    Ok(
                        Arc::new(peers::AsLock(peers::Rslock(rslock::LockManager::new(
                            vec![u],
                        )))) as Client,
                    )
                })
            }),
        });
    }
    if let Some(urls) = env("DLOCK_TEST_REDLOCK_URLS") {
        let list: Vec<String> = urls.split(',').map(str::to_owned).collect();
        out.push(Pair {
            label: "Redlock ×5 — rslock",
            dlock_url: format!("redlock://{}", urls.replace("redis://", "")),
            peer: Box::new(move || {
                let l = list.clone();
                Box::pin(async move {
                    Ok(
                        Arc::new(peers::AsLock(peers::Rslock(rslock::LockManager::new(l))))
                            as Client,
                    )
                })
            }),
        });
    }
    if let Some(e) = env("DLOCK_TEST_ETCD_ENDPOINTS") {
        let eps: Vec<String> = e.split(',').map(str::to_owned).collect();
        out.push(Pair {
            label: "etcd — etcd-client lock",
            dlock_url: format!("etcd://{}", e.replace("http://", "")),
            peer: Box::new(move || {
                let eps = eps.clone();
                Box::pin(async move {
                    Ok(Arc::new(peers::AsLock(peers::EtcdV3Lock::connect(&eps).await?)) as Client)
                })
            }),
        });
    }
    if let Some(a) = env("DLOCK_TEST_ZK_ADDR") {
        let addr = a.clone();
        out.push(Pair {
            label: "ZooKeeper — zookeeper-client recipe",
            dlock_url: format!("zk://{a}"),
            peer: Box::new(move || {
                let addr = addr.clone();
                Box::pin(async move {
                    let c = zookeeper_client::Client::connect(&addr)
                        .await
                        .map_err(|e| LockError::Backend {
                            message: e.to_string(),
                            source: None,
                        })?;
                    Ok(Arc::new(peers::AsLock(peers::ZkRecipe(c))) as Client)
                })
            }),
        });
    }
    if let Some(url) = env("DLOCK_TEST_POSTGRES_URL") {
        let u = url.clone();
        out.push(Pair {
            label: "PostgreSQL — sqlx PgAdvisoryLock",
            dlock_url: url,
            peer: Box::new(move || {
                let u = u.clone();
                Box::pin(async move {
                    Ok(Arc::new(peers::AsLock(peers::PgAdvisory::connect(&u).await?)) as Client)
                })
            }),
        });
    }
    out
}

struct Row {
    scenario: &'static str,
    metric: &'static str,
    dlock: f64,
    peer: f64,
}

async fn many(
    make: impl AsyncFn() -> Result<Client, LockError>,
    n: usize,
) -> Result<Vec<Client>, LockError> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(make().await?);
    }
    Ok(v)
}

/// The three scenarios, dlock and peer alternating in rounds.
async fn compare(pair: &Pair) -> Result<Vec<Row>, LockError> {
    let dlock = async || dlock_any::connect(&pair.dlock_url).await;
    let peer = async || (pair.peer)().await;
    let (d, p) = (dlock().await?, peer().await?);
    let (mut du, mut pu, mut dh, mut ph) = (
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    );
    let (mut dc, mut pc, mut dw, mut pw) = (0.0, 0.0, Samples::default(), Samples::default());
    let rounds = 3;
    for _ in 0..rounds {
        du.extend(scenarios::uncontended(&*d, 300).await?);
        pu.extend(scenarios::uncontended(&*p, 300).await?);
        dh.extend(scenarios::handoff(dlock().await?, dlock().await?, 8).await?);
        ph.extend(scenarios::handoff(peer().await?, peer().await?, 8).await?);
        let c = scenarios::contended(many(dlock, 8).await?, Duration::from_secs(2)).await?;
        dc += c.cycles_per_s / f64::from(rounds);
        dw.extend(c.waits);
        let c = scenarios::contended(many(peer, 8).await?, Duration::from_secs(2)).await?;
        pc += c.cycles_per_s / f64::from(rounds);
        pw.extend(c.waits);
    }
    Ok(vec![
        Row {
            scenario: "uncontended",
            metric: "cycle p50 ms",
            dlock: du.percentile_ms(50.0),
            peer: pu.percentile_ms(50.0),
        },
        Row {
            scenario: "uncontended",
            metric: "cycle p99 ms",
            dlock: du.percentile_ms(99.0),
            peer: pu.percentile_ms(99.0),
        },
        Row {
            scenario: "handoff",
            metric: "p50 ms",
            dlock: dh.percentile_ms(50.0),
            peer: ph.percentile_ms(50.0),
        },
        Row {
            scenario: "handoff",
            metric: "p99 ms",
            dlock: dh.percentile_ms(99.0),
            peer: ph.percentile_ms(99.0),
        },
        Row {
            scenario: "contended",
            metric: "cycles/s",
            dlock: dc,
            peer: pc,
        },
        Row {
            scenario: "contended",
            metric: "p99 wait ms",
            dlock: dw.percentile_ms(99.0),
            peer: pw.percentile_ms(99.0),
        },
        Row {
            scenario: "contended",
            metric: "max wait ms",
            dlock: dw.max_ms(),
            peer: pw.max_ms(),
        },
    ])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let mut out = String::from(
        "| backend — peer | scenario | metric | dlock | peer | dlock ÷ peer |\n|---|---|---|---|---|---|\n",
    );
    let mut failed = false;
    for pair in pairs() {
        eprintln!("{} …", pair.label);
        match compare(&pair).await {
            Ok(rows) => {
                for r in rows {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {:.3} | {:.3} | {:.2} |",
                        pair.label,
                        r.scenario,
                        r.metric,
                        r.dlock,
                        r.peer,
                        r.dlock / r.peer
                    );
                }
            }
            Err(e) => {
                eprintln!("{}: {e}", pair.label);
                failed = true;
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(out.as_bytes()).is_err() || failed {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
