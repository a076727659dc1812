//! The connection a node's commands go through: to one Redis server; behind Sentinel,
//! to whichever server the sentinels name master, followed across failovers; or to a
//! Redis Cluster, whose client routes each command by its keys' slot and follows
//! `MOVED` and `ASK` redirections (slot migrations, failovers) itself.
//!
//! The redis crate's `ConnectionManager` reconnects to the address it was made for.
//! After a failover that address is gone, or serves as a replica (writes answer
//! `READONLY`). So a connection error or a `READONLY` answer makes a followed
//! connection ask the sentinels again (one asker at a time); when they name another
//! master, a manager for it replaces the old one, and the channels waiters listen on
//! are subscribed there too. A command given up on before it answered (dlock's own
//! timeout, while the manager waits to reconnect to a server that is gone without
//! refusing) asks too. The failed command itself is not retried here: its outcome
//! is unknown, and the caller's retry rules (acquire within its wait, renewals until
//! `valid_until`) apply as for any outage.
//!
//! A followed connection that dropped is not trusted again until it is verified: the
//! manager reconnects to its old address by itself, and an old master that restarted
//! answers as a master until the sentinels make it a replica — a client idle through
//! the failover would otherwise lock there while another holds the lock on the new
//! master. So a dropped connection (the manager's `Disconnection` push) marks it
//! unverified, and the next command first asks the sentinels, moves if they name
//! another master, and checks `ROLE` on the server it will use.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, PushInfo, RedisFuture, Value};
use tokio::sync::mpsc::UnboundedSender;

use crate::sentinel::Sentinels;

/// A shared handle; clones are cheap and see the same current server.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server, or the master Sentinel names.
    Server(Arc<Shared>),
    /// A Redis Cluster (its client is a cheap handle too): commands on `data`, sharded
    /// subscriptions on `subs`. Apart, because a slot that moves makes the server end
    /// its subscriptions unasked, and redis-rs takes that message for the reply to the
    /// oldest request in flight on the connection — on a connection that also carries
    /// lock scripts, a script would get another's answer.
    Cluster {
        data: ClusterConnection,
        subs: ClusterConnection,
    },
}

pub(crate) struct Shared {
    current: RwLock<ConnectionManager>,
    follow: Option<Follow>,
}

/// What following the master needs.
struct Follow {
    sentinels: Sentinels,
    /// The master's address the current manager was made for.
    master: Mutex<(String, u16)>,
    /// A new manager's settings: the push sender of the node's wake-ups among them.
    timeout: Duration,
    pushes: UnboundedSender<PushInfo>,
    /// Channels with waiters, subscribed again on a new master.
    subscribed: Mutex<BTreeSet<String>>,
    /// One asker at a time.
    asking: tokio::sync::Mutex<()>,
    /// The current server was a master when last checked, and the connection has not
    /// dropped since.
    verified: AtomicBool,
}

/// The manager settings every connection of a node uses.
pub(crate) fn manager_config(
    timeout: Duration,
    pushes: UnboundedSender<PushInfo>,
) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_max_delay(Duration::from_millis(500))
        .set_push_sender(pushes)
        .set_automatic_resubscription()
}

impl Conn {
    /// A connection to one server, for good.
    pub(crate) fn fixed(manager: ConnectionManager) -> Self {
        Self::Server(Arc::new(Shared {
            current: RwLock::new(manager),
            follow: None,
        }))
    }

    /// A connection to `master`, the master `sentinels` named, following it.
    pub(crate) fn following(
        manager: ConnectionManager,
        sentinels: Sentinels,
        master: (String, u16),
        timeout: Duration,
        pushes: UnboundedSender<PushInfo>,
    ) -> Self {
        Self::Server(Arc::new(Shared {
            current: RwLock::new(manager),
            follow: Some(Follow {
                sentinels,
                master: Mutex::new(master),
                timeout,
                pushes,
                subscribed: Mutex::new(BTreeSet::new()),
                asking: tokio::sync::Mutex::new(()),
                // the sentinels named it and it answered ROLE as a master just now
                verified: AtomicBool::new(true),
            }),
        }))
    }

    /// The command a release wakes waiters with: sharded pub/sub on a cluster, so the
    /// message goes to the shard of the lock's slot (and is not broadcast to every node).
    pub(crate) fn publish_command(&self) -> &'static str {
        match self {
            Self::Server(_) => "PUBLISH",
            Self::Cluster { .. } => "SPUBLISH",
        }
    }

    /// Whether this is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster { .. })
    }

    /// Subscribes `channel` (RESP3 push) on the current server, and on every later one.
    pub(crate) async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Server(sh) => {
                if let Some(f) = &sh.follow {
                    lock(&f.subscribed).insert(channel.to_owned());
                }
                let r = sh.manager().subscribe(channel).await;
                sh.check(r.as_ref().err());
                r
            }
            Self::Cluster { subs, .. } => subs.clone().ssubscribe(channel).await,
        }
    }

    /// The connection dropped: a followed one is verified again before its next
    /// command (see the module's doc).
    pub(crate) fn connection_dropped(&self) {
        if let Self::Server(sh) = self
            && let Some(f) = &sh.follow
        {
            f.verified.store(false, Ordering::SeqCst);
        }
    }

    /// Unsubscribes `channel`.
    pub(crate) async fn unsubscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Server(sh) => {
                if let Some(f) = &sh.follow {
                    lock(&f.subscribed).remove(channel);
                }
                sh.manager().unsubscribe(channel).await
            }
            Self::Cluster { subs, .. } => subs.clone().sunsubscribe(channel).await,
        }
    }
}

impl Shared {
    fn manager(&self) -> ConnectionManager {
        match self.current.read() {
            Ok(m) => m.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// After a failed command: a followed connection whose server may no longer be the
    /// master asks the sentinels, in the background.
    fn check(self: &Arc<Self>, err: Option<&redis::RedisError>) {
        if err.is_some_and(may_have_moved) {
            self.ask();
        }
    }

    /// Asks the sentinels for the master in the background (a followed connection).
    fn ask(self: &Arc<Self>) {
        if self.follow.is_none() {
            return;
        }
        let me = Arc::clone(self);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { me.follow_master().await });
        }
    }

    /// Asks the sentinels for the master; moves to it if it is another server.
    async fn follow_master(&self) {
        let Some(f) = &self.follow else { return };
        let Ok(_one) = f.asking.try_lock() else {
            return; // someone is asking already
        };
        self.move_to_named_master(f).await;
    }

    /// Before a command on a connection that dropped since it was last checked: asks
    /// the sentinels (moving if they name another master), then `ROLE` on the server
    /// the command will go to. Until the sentinels name a master and that server says
    /// it is one, commands fail as in an outage: a server's own word is not enough
    /// (an old master restarted says it is a master).
    async fn verify(&self) -> redis::RedisResult<()> {
        let Some(f) = &self.follow else { return Ok(()) };
        if f.verified.load(Ordering::SeqCst) {
            return Ok(());
        }
        let _one = f.asking.lock().await;
        if f.verified.load(Ordering::SeqCst) {
            return Ok(()); // another command verified it meanwhile
        }
        if !self.move_to_named_master(f).await {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "reconnected, and no sentinel names a master to check the server against",
            )
            .into());
        }
        let role: Vec<Value> = redis::cmd("ROLE").query_async(&mut self.manager()).await?;
        if crate::sentinel::is_master_role(&role) {
            f.verified.store(true, Ordering::SeqCst);
            Ok(())
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the server the sentinels named is not a master (yet)",
            )
            .into())
        }
    }

    /// Moves to the master the sentinels name, if it is another server (the caller
    /// holds `asking`); whether the connection is now to the master they name.
    async fn move_to_named_master(&self, f: &Follow) -> bool {
        let Some(master) = f.sentinels.master().await else {
            return false;
        };
        if *lock(&f.master) == master {
            return true;
        }
        let config = manager_config(f.timeout, f.pushes.clone());
        let Ok(manager) = f.sentinels.manager(&master, config).await else {
            return false;
        };
        tracing::warn!(
            master = %format!("{}:{}", master.0, master.1),
            "Redis Sentinel names a new master: following it"
        );
        // swap first, then subscribe what the set holds: a subscribe() that adds a
        // channel after this read already sees the new manager
        match self.current.write() {
            Ok(mut m) => *m = manager.clone(),
            Err(poisoned) => *poisoned.into_inner() = manager.clone(),
        }
        *lock(&f.master) = master;
        let channels: Vec<String> = lock(&f.subscribed).iter().cloned().collect();
        for ch in &channels {
            let _ = manager.clone().subscribe(ch).await;
        }
        // releases published while no one listened are lost: every waiter looks again
        let _ = f.pushes.send(PushInfo {
            kind: redis::PushKind::Disconnection,
            data: Vec::new(),
        });
        true
    }

    /// Sends one command; a followed connection asks the sentinels when the answer
    /// (or its absence) says the master may have moved.
    async fn command(self: &Arc<Self>, cmd: &Cmd) -> redis::RedisResult<Value> {
        self.verify().await?;
        let mut unanswered = AskIfDropped(self.follow.as_ref().map(|_| Arc::clone(self)));
        let r = self.manager().req_packed_command(cmd).await;
        unanswered.0 = None;
        match &r {
            Err(e) => self.check(Some(e)),
            Ok(Value::ServerError(e)) if moved_code(e.code()) => self.ask(),
            Ok(_) => {}
        }
        r
    }

    /// Sends a pipeline, as [`Shared::command`].
    async fn commands(
        self: &Arc<Self>,
        cmd: &Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<Value>> {
        self.verify().await?;
        let mut unanswered = AskIfDropped(self.follow.as_ref().map(|_| Arc::clone(self)));
        let r = self.manager().req_packed_commands(cmd, offset, count).await;
        unanswered.0 = None;
        match &r {
            Err(e) => self.check(Some(e)),
            Ok(values) => {
                let moved = values
                    .iter()
                    .any(|v| matches!(v, Value::ServerError(e) if moved_code(e.code())));
                if moved {
                    self.ask();
                }
            }
        }
        r
    }
}

/// Whether an error says the server may have failed over: it cannot be reached, or it
/// is a replica now.
fn may_have_moved(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.code().is_some_and(moved_code)
}

/// A server error code that says the server is not the master (any more), or a master
/// cut off from its replicas (`min-replicas-to-write`), which a failover may be about
/// to replace.
fn moved_code(code: &str) -> bool {
    matches!(code, "READONLY" | "MASTERDOWN" | "NOREPLICAS")
}

/// Asks the sentinels when a command is dropped before it answered (a followed
/// connection): the server may be gone without refusing, and the caller's timeout
/// ran out before the manager's own error could.
struct AskIfDropped(Option<Arc<Shared>>);

impl Drop for AskIfDropped {
    fn drop(&mut self) {
        if let Some(sh) = self.0.take() {
            sh.ask();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            match self {
                Self::Server(sh) => sh.command(cmd).await,
                Self::Cluster { data, .. } => data.req_packed_command(cmd).await,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            match self {
                Self::Server(sh) => sh.commands(cmd, offset, count).await,
                Self::Cluster { data, .. } => data.req_packed_commands(cmd, offset, count).await,
            }
        })
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Server(sh) => sh.manager().get_db(),
            Self::Cluster { data, .. } => data.get_db(),
        }
    }
}
