//! The faults, and how to find a cluster's leader.

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One fault, applied once in the middle of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nemesis {
    /// `kill -9` of the worker holding the lock.
    KillHolder,
    /// `kill -9` of a worker waiting for the lock (queued behind the holder where the
    /// backend queues): the lock must go on to the live waiters, and no grant to the
    /// dead one may hold it for longer than a TTL.
    KillWaiter,
    /// `SIGSTOP` of a holder right after it read the counter, past its TTL, then
    /// `SIGCONT` (it then writes what it read, plus one).
    PauseHolder,
    /// An operator revokes the holder while it is between its read and its write
    /// (`dlock release --force --yes`): nobody else may be granted the lock while the
    /// revoked holder still works inside its lease.
    RevokeHolder,
    /// A read-write lock's writer `SIGSTOP`ped right after it read the counter, past
    /// its TTL and until a reader has read under a later read lease, then `SIGCONT`
    /// (it then writes what it read, plus one, with its old token): readers must raise
    /// the fence when they read, or that write lands under the reader's lease.
    PauseWriter,
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
    /// A replica that fell behind is promoted (single Redis): replication cut, 1.5 s
    /// more of the workload, then the primary takes the replica's data, as failing
    /// over to it would (see [`crate::replica`]).
    LaggingReplica,
    /// PostgreSQL fails over to an asynchronous standby that fell behind: the
    /// standby's replication cut, 1.5 s more of the workload, then the standby promoted
    /// and every worker moved to it (see [`crate::standby`]).
    StandbyPromoted,
    /// Redis Sentinel fails the master over to a replica that fell behind: the replicas
    /// paused, 1.5 s more of the workload, the master killed and the replicas resumed;
    /// the sentinels promote one and the workers follow (see [`crate::sentinel`]).
    SentinelFailover,
    /// A Redis Cluster master fails over to a replica that fell behind: the replica of
    /// the lock's slot paused, 1.5 s more of the workload, the master killed and the
    /// replica resumed; the cluster promotes it and the workers' clients follow the new
    /// slot map (see [`crate::cluster`]).
    ClusterFailover,
    /// The server a holder is connected to is cut off from its peers past the TTL
    /// while its clients still reach it (a follower answering from a stale copy).
    ServerPartition,
    /// The workers' wall clocks stepped two hours ahead while a holder is mid-update
    /// (their monotonic clocks untouched), as an operator's `date -s` or an NTP step
    /// does. On SQLite the workers' clock is the database's.
    ClientClockAhead,
    /// The workers' wall clocks stepped two hours back while a holder is mid-update.
    ClientClockBehind,
    /// Every worker's clocks, timers included, run at 0.995 of true speed for the whole
    /// run: slower by less than the drift margin (1 % + 2 ms). Each holder works until
    /// the deadline its lease gives on its own clock.
    ClientClockSlow,
    /// As [`Nemesis::ClientClockSlow`] at 0.8 of true speed: beyond the drift margin, a
    /// holder believes in its lease after the server has expired it.
    ClientClockVerySlow,
    /// As [`Nemesis::ClientClockSlow`] at 1.25 of true speed.
    ClientClockFast,
    /// The servers' wall clocks stepped two hours ahead while a holder is mid-update
    /// (the servers are restarted on a faked clock before the run and restored after;
    /// Redlock: 2 of its 5 nodes).
    ServerClockAhead,
    /// The servers' wall clocks stepped two hours back while a holder is mid-update.
    ServerClockBehind,
    /// Redlock after a node loses its data, with grants the others never saw: two of
    /// the five nodes cut off, the workers' wall clocks stepped 20 s ahead for 1.5 s
    /// (grants made then are on the other three only, at whatever token the skewed
    /// clocks propose); then the clocks put back, one of those three restarted without
    /// its data, and for 3 s only it and the two that were cut off reachable. They are a
    /// quorum that never saw those grants: without a bound on proposals and a delayed
    /// restart they grant a held name again, below tokens already handed out.
    RedlockNodeForgets,
}

/// How far the clock drills step a wall clock: two hours, in seconds.
pub const CLOCK_STEP_SECS: i64 = 7200;

impl Nemesis {
    /// Label for the report.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::KillHolder => "kill -9 holder",
            Self::KillWaiter => "kill -9 queued waiter",
            Self::PauseHolder => "SIGSTOP holder > TTL",
            Self::RevokeHolder => "release --force (revoke) holder mid-update",
            Self::PauseWriter => "SIGSTOP writer > TTL, then a later reader reads",
            Self::Partition => "partition holder",
            Self::Latency => "latency +100 ms",
            Self::RestartServer => "restart server",
            Self::KillMember => "kill minority",
            Self::KillLeader => "kill leader",
            Self::DataLoss => "data loss (old snapshot)",
            Self::LaggingReplica => "data loss (lagging replica promoted)",
            Self::StandbyPromoted => "failover to a lagging async standby",
            Self::SentinelFailover => "Sentinel failover to a lagging replica",
            Self::ClusterFailover => "Cluster failover to a lagging replica",
            Self::ServerPartition => "partition server from peers",
            Self::ClientClockAhead => "client clock +2 h (wall)",
            Self::ClientClockBehind => "client clock −2 h (wall)",
            Self::ClientClockSlow => "client clock ×0.995 (within drift margin)",
            Self::ClientClockVerySlow => "client clock ×0.8 (beyond drift margin)",
            Self::ClientClockFast => "client clock ×1.25",
            Self::ServerClockAhead => "server clock +2 h",
            Self::ServerClockBehind => "server clock −2 h",
            Self::RedlockNodeForgets => "client clock +20 s, 2 nodes cut off, 1 restarted empty",
        }
    }

    /// The clock faults, in the order the report lists them.
    pub const CLOCKS: [Self; 7] = [
        Self::ClientClockAhead,
        Self::ClientClockBehind,
        Self::ClientClockSlow,
        Self::ClientClockVerySlow,
        Self::ClientClockFast,
        Self::ServerClockAhead,
        Self::ServerClockBehind,
    ];

    /// The speed of the workers' clocks under a rate fault.
    #[must_use]
    pub fn client_clock_rate(self) -> Option<f64> {
        match self {
            Self::ClientClockSlow => Some(0.995),
            Self::ClientClockVerySlow => Some(0.8),
            Self::ClientClockFast => Some(1.25),
            _ => None,
        }
    }

    /// The step, in seconds, of the workers' wall clocks under a step fault.
    #[must_use]
    pub fn client_clock_step(self) -> Option<i64> {
        match self {
            Self::ClientClockAhead => Some(CLOCK_STEP_SECS),
            Self::ClientClockBehind => Some(-CLOCK_STEP_SECS),
            _ => None,
        }
    }

    /// Whether the workers run on a faked clock that the fault itself moves (the clock
    /// faults step it once; [`Nemesis::RedlockNodeForgets`] steps it and back).
    #[must_use]
    pub fn on_fake_client_clock(self) -> bool {
        self.client_clock_step().is_some()
            || self.client_clock_rate().is_some()
            || self == Self::RedlockNodeForgets
    }

    /// The step, in seconds, of the servers' wall clocks under a step fault.
    #[must_use]
    pub fn server_clock_step(self) -> Option<i64> {
        match self {
            Self::ServerClockAhead => Some(CLOCK_STEP_SECS),
            Self::ServerClockBehind => Some(-CLOCK_STEP_SECS),
            _ => None,
        }
    }

    /// Whether the backend must keep mutual exclusion under this fault. Under data
    /// loss a non-durable backend cannot (a reloaded snapshot or a promoted replica
    /// forgets the holder); the overlaps are reported, and the fence must still reject
    /// every stale write.
    ///
    /// A client clock slower than the drift margin allows breaks the assumption the
    /// lease's deadline rests on; see also [`crate::backends::Backend::exclusion_expected`]
    /// for the clock steps that only some backends' expiry follows.
    #[must_use]
    pub fn exclusion_expected(self) -> bool {
        !matches!(
            self,
            Self::DataLoss
                | Self::LaggingReplica
                | Self::StandbyPromoted
                | Self::SentinelFailover
                | Self::ClusterFailover
                | Self::ClientClockVerySlow
        )
    }
}

/// Sends one command to the Redis server at `host` (`host:port`) in RESP; `true` when
/// it answered with a simple string (`+OK`).
pub async fn redis_command(host: &str, args: &[&str]) -> bool {
    let Ok(mut s) = TcpStream::connect(host).await else {
        return false;
    };
    if s.write_all(resp(args).as_bytes()).await.is_err() {
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
    services_with(script, action, names, &[]).await
}

/// [`services`] with `env` added to the environment the servers start in (a faked
/// clock's).
pub async fn services_with(
    script: &Path,
    action: &str,
    names: &[&str],
    env: &[(&'static str, String)],
) -> bool {
    let Ok(dir) = std::env::var("DLOCK_SVC_DIR") else {
        return false;
    };
    let mut cmd = tokio::process::Command::new(script);
    cmd.arg("ctl").arg(dir).arg(action).args(names);
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
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

/// The `INFO section` text of the Redis server at `host` (`host:port`).
pub async fn redis_info(host: &str, section: &str) -> Option<String> {
    redis_bulk(host, &["INFO", section]).await
}

/// Sends one command whose answer is a bulk string (`GET`, `INFO`) and returns it.
pub async fn redis_bulk(host: &str, args: &[&str]) -> Option<String> {
    let mut s = TcpStream::connect(host).await.ok()?;
    s.write_all(resp(args).as_bytes()).await.ok()?;
    let read = async {
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            // a bulk string: `$LEN\r\n` then LEN bytes and `\r\n`
            if let Some(end) = reply.windows(2).position(|w| w == b"\r\n") {
                let len: usize = std::str::from_utf8(reply.get(1..end)?).ok()?.parse().ok()?;
                if reply.len() >= end + 2 + len {
                    return String::from_utf8(reply[end + 2..end + 2 + len].to_vec()).ok();
                }
            }
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            reply.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .ok()?
}

/// `args` as a RESP request.
fn resp(args: &[&str]) -> String {
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    req
}
