//! The faults, and how to find a cluster's leader.

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One fault, applied once in the middle of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nemesis {
    /// `kill -9` of the worker holding the lock.
    KillHolder,
    /// `SIGSTOP` of a holder right after it read the counter, past its TTL, then
    /// `SIGCONT` (it then writes what it read, plus one).
    PauseHolder,
    /// The holder's network path to the servers blackholed past its TTL, then healed.
    Partition,
    /// 100 ms added to every packet of every worker for 2 s.
    Latency,
    /// The (single) server restarted.
    RestartServer,
    /// A minority of members killed (a follower; 2 of 5 Redlock nodes), then restarted.
    KillMember,
    /// The cluster's leader killed, then restarted.
    KillLeader,
    /// Redis data comes back older: `SAVE` on every server, 1.5 s more of the
    /// workload, then `DEBUG RELOAD NOSAVE` (the old snapshot reloaded, as a restart
    /// from it or a restore would). Lock keys and fencing counters go back in time.
    DataLoss,
    /// The server a holder is connected to is cut off from its peers past the TTL
    /// while its clients still reach it (a follower answering from a stale copy).
    ServerPartition,
}

impl Nemesis {
    /// Label for the report.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::KillHolder => "kill -9 holder",
            Self::PauseHolder => "SIGSTOP holder > TTL",
            Self::Partition => "partition holder",
            Self::Latency => "latency +100 ms",
            Self::RestartServer => "restart server",
            Self::KillMember => "kill minority",
            Self::KillLeader => "kill leader",
            Self::DataLoss => "data loss (old snapshot)",
            Self::ServerPartition => "partition server from peers",
        }
    }

    /// Whether the backend must keep mutual exclusion under this fault. Under data
    /// loss a non-durable backend cannot (a reloaded snapshot forgets the holder); the
    /// overlaps are reported, and the fence must still reject every stale write.
    #[must_use]
    pub fn exclusion_expected(self) -> bool {
        self != Self::DataLoss
    }
}

/// Sends one command to the Redis server at `host` (`host:port`) in RESP; `true` when
/// it answered with a simple string (`+OK`).
pub async fn redis_command(host: &str, args: &[&str]) -> bool {
    let Ok(mut s) = TcpStream::connect(host).await else {
        return false;
    };
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    if s.write_all(req.as_bytes()).await.is_err() {
        return false;
    }
    let mut first = [0u8; 1];
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(10), s.read_exact(&mut first)).await,
        Ok(Ok(_))
    ) && first[0] == b'+'
}

/// Runs `scripts/services ctl DIR ACTION NAMES...`.
pub async fn services(script: &Path, action: &str, names: &[&str]) -> bool {
    let Ok(dir) = std::env::var("DLOCK_SVC_DIR") else {
        return false;
    };
    let mut cmd = tokio::process::Command::new(script);
    cmd.arg("ctl").arg(dir).arg(action).args(names);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd.status().await.is_ok_and(|s| s.success())
}

/// The index of the leading member among `hosts` (`host:port`), asked the server's
/// own way: ZooKeeper's `srvr` command, etcd's JSON gateway.
pub async fn leader(hosts: &[String], etcd: bool) -> Option<usize> {
    if etcd {
        let mut ids = Vec::new();
        let mut leader = None;
        for h in hosts {
            let (id, l) = dlock_conformance::etcd_status(h).await?;
            ids.push(id);
            leader = Some(l);
        }
        let leader = leader?;
        return ids.iter().position(|id| *id == leader);
    }
    for (i, h) in hosts.iter().enumerate() {
        let Ok(mut s) = TcpStream::connect(h).await else {
            continue;
        };
        let _ = s.write_all(b"srvr").await;
        let mut out = String::new();
        let _ = s.read_to_string(&mut out).await;
        if out.contains("Mode: leader") {
            return Some(i);
        }
    }
    None
}
