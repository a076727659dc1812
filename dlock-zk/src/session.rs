//! The ZooKeeper session, replaced by a new one when it expires.

use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::within;
use zookeeper_client as zk;

/// How to open a session.
#[derive(Clone)]
pub(crate) struct Params {
    pub hosts: String,
    pub session_timeout: Duration,
    pub op_timeout: Duration,
    pub auth: Option<Vec<u8>>,
}

/// Holds the current session. ZooKeeper sessions end for good (expired, closed, auth
/// failed); the locks of an ended session are gone, and new work needs a new session.
pub(crate) struct Session {
    params: Params,
    client: tokio::sync::Mutex<zk::Client>,
}

impl Session {
    pub(crate) async fn open(params: Params) -> Result<Self, LockError> {
        let client = connect(&params).await?;
        Ok(Self {
            params,
            client: tokio::sync::Mutex::new(client),
        })
    }

    /// The live session, opening a new one if the current one has ended.
    pub(crate) async fn get(&self) -> Result<zk::Client, LockError> {
        let mut current = self.client.lock().await;
        if matches!(
            current.state(),
            zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
        ) {
            tracing::info!("ZooKeeper session ended; opening a new one");
            *current = connect(&self.params).await?;
        }
        Ok(current.clone())
    }

    pub(crate) fn op_timeout(&self) -> Duration {
        self.params.op_timeout
    }
}

/// How long a lease stays valid after a renewal sent at `S` and confirmed through the
/// leader: 3/5 of the session timeout.
///
/// The leader expires a session a timeout after the last activity *it* heard of, and it
/// hears of a client's activity only through the follower the client is connected to,
/// which reports the sessions it saw at each of the leader's pings (every tickTime / 2).
/// A follower cut off from the leader right after confirming our renewal may not have
/// reported our last requests: the leader's last record of us can be as old as our
/// previous message (the client pings after 3/8 of its connection timeout idle, which
/// we keep at most 2/5 of the session timeout, so within 3/20 of it) plus one of its
/// ping periods (at most a quarter of the session timeout, as a server's minimum
/// session timeout is two ticks). The leader therefore cannot expire the session before
/// `S + timeout − 2/5 × timeout`, and the lease stops being trusted before that.
pub fn lease_ttl(session_timeout: Duration) -> Duration {
    session_timeout * 3 / 5
}

/// The connection timeout for a session: at most 2/5 of the session timeout, so the
/// client pings often enough for [`lease_ttl`]'s bound.
fn connection_timeout(p: &Params) -> Duration {
    p.op_timeout.min(p.session_timeout * 2 / 5)
}

async fn connect(p: &Params) -> Result<zk::Client, LockError> {
    let mut connector = zk::Client::connector()
        .with_session_timeout(p.session_timeout)
        .with_connection_timeout(connection_timeout(p));
    if let Some(auth) = &p.auth {
        connector = connector.with_auth("digest", auth);
    }
    let hosts = p.hosts.clone();
    // the client retries refused servers until its timeout, then says "timeout": a
    // down ensemble is named at once (a chroot follows the host list)
    let servers: Vec<&str> = hosts
        .split('/')
        .next()
        .unwrap_or_default()
        .split(',')
        .collect();
    dlock_core::backend::any_reachable("ZooKeeper", &servers, connection_timeout(p)).await?;
    let what = format!("connecting to ZooKeeper {hosts}");
    within(p.op_timeout * 2, &what, async {
        connector
            .connect(&hosts)
            .await
            .map_err(|e| crate::errors::from_zk(&what, e))
    })
    .await
}
