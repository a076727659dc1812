//! A TCP fault proxy on loopback: pass, delay, blackhole, reset.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::Link;

/// What the proxy does with traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultMode {
    /// Forward everything at once.
    Pass,
    /// Forward every chunk after this delay, in both directions.
    Delay(Duration),
    /// Forward requests at once but every chunk from the server after this delay: the
    /// server applies what it is sent while the client waits past its timeout for the
    /// answer (a late commit).
    DelayReplies(Duration),
    /// Forward nothing: bytes wait in the socket buffers and new connections are
    /// accepted but not connected upstream, as in a network partition. `Pass` lets
    /// the held bytes through.
    Blackhole,
}

/// A TCP proxy between clients and one server, controllable while it runs.
///
/// ```
/// use dlock_conformance::{FaultMode, FaultProxy};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let server = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let proxy = FaultProxy::start(&server.local_addr()?.to_string()).await?;
/// // point the client at proxy.addr() instead of the server
/// proxy.set_mode(FaultMode::Blackhole);
/// proxy.set_mode(FaultMode::Pass);
/// proxy.reset(); // drop every open connection
/// # Ok(()) }
/// ```
pub struct FaultProxy {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    mode: watch::Sender<FaultMode>,
    resets: watch::Sender<u64>,
    target: watch::Sender<String>,
    accept_task: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `target` (`host:port`).
    ///
    /// # Errors
    /// When the loopback port cannot be bound.
    pub async fn start(target: &str) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (mode, _) = watch::channel(FaultMode::Pass);
        let (resets, _) = watch::channel(0_u64);
        let requests = Arc::new(AtomicU64::new(0));
        let (target, _) = watch::channel(target.to_owned());
        let accept_task = tokio::spawn(accept_loop(
            listener,
            target.clone(),
            mode.clone(),
            resets.clone(),
            Arc::clone(&requests),
        ));
        Ok(Self {
            addr,
            requests,
            mode,
            resets,
            target,
            accept_task,
        })
    }

    /// Sends new connections to `target` (`host:port`) from now on and closes the
    /// open ones, as a virtual IP or DNS name moved to another server would: clients
    /// reconnect and reach the new server.
    pub fn retarget(&self, target: &str) {
        self.target.send_replace(target.to_owned());
        self.reset();
    }

    /// The address clients connect to.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A proxy in front of the server `url` names, and `url` through it.
    ///
    /// # Panics
    /// When `url` has no `host:port` or no local port is free.
    pub async fn in_front_of(url: &str) -> (Self, String) {
        let target = crate::url_host_port(url).expect("a URL with host:port");
        let proxy = Self::start(&target).await.expect("a free local port");
        let through = crate::url_with_host_port(url, &proxy.addr().to_string());
        (proxy, through)
    }

    /// Changes what the proxy does, for open and new connections.
    pub fn set_mode(&self, mode: FaultMode) {
        self.mode.send_replace(mode);
    }

    /// The current mode.
    #[must_use]
    pub fn mode(&self) -> FaultMode {
        *self.mode.borrow()
    }

    /// How many requests clients have sent through the proxy so far: chunks toward the
    /// server of at least [`REQUEST_BYTES`] bytes, so that keepalives do not count.
    #[must_use]
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Closes every open connection at once (both sides see the connection drop).
    pub fn reset(&self) {
        self.resets.send_modify(|g| *g += 1);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        self.reset();
    }
}

/// The smallest chunk [`FaultProxy::requests`] counts as a request: above every
/// keepalive of the backends tested here (a ZooKeeper ping is 12 bytes, an HTTP/2
/// PING frame 17, a `WINDOW_UPDATE` 13), below every lock operation.
pub const REQUEST_BYTES: usize = 24;

#[async_trait]
impl Link for FaultProxy {
    async fn cut(&self) {
        self.set_mode(FaultMode::Blackhole);
    }
    async fn heal(&self) {
        self.set_mode(FaultMode::Pass);
    }
    fn requests(&self) -> Option<u64> {
        Some(FaultProxy::requests(self))
    }
}

#[async_trait]
impl Link for Arc<FaultProxy> {
    async fn cut(&self) {
        Link::cut(&**self).await;
    }
    async fn heal(&self) {
        Link::heal(&**self).await;
    }
    fn requests(&self) -> Option<u64> {
        Some(FaultProxy::requests(self))
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: watch::Sender<String>,
    mode: watch::Sender<FaultMode>,
    resets: watch::Sender<u64>,
    requests: Arc<AtomicU64>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let mode_rx = mode.subscribe();
        let mut reset_rx = resets.subscribe();
        reset_rx.mark_unchanged();
        let target = target.borrow().clone();
        let requests = Arc::clone(&requests);
        tokio::spawn(async move {
            tokio::select! {
                _ = serve(client, &target, mode_rx, requests) => {}
                _ = reset_rx.changed() => {}
            }
        });
    }
}

async fn serve(
    client: TcpStream,
    target: &str,
    mut mode: watch::Receiver<FaultMode>,
    requests: Arc<AtomicU64>,
) {
    if wait_not_blackholed(&mut mode).await.is_err() {
        return;
    }
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::join!(
        pump(cr, sw, mode.clone(), Some(&requests)),
        pump(sr, cw, mode, None)
    );
}

async fn wait_not_blackholed(mode: &mut watch::Receiver<FaultMode>) -> Result<(), ()> {
    mode.wait_for(|m| *m != FaultMode::Blackhole)
        .await
        .map(|_| ())
        .map_err(|_| ())
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut mode: watch::Receiver<FaultMode>,
    // Some: toward the server, counting requests
    requests: Option<&AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if wait_not_blackholed(&mut mode).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        // The mode may have changed while we were reading: hold the bytes if so.
        if wait_not_blackholed(&mut mode).await.is_err() {
            return;
        }
        let current = *mode.borrow();
        match current {
            FaultMode::Delay(d) => tokio::time::sleep(d).await,
            FaultMode::DelayReplies(d) if requests.is_none() => {
                tokio::time::sleep(d).await;
            }
            _ => {}
        }
        if let Some(count) = requests.filter(|_| n >= REQUEST_BYTES) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
