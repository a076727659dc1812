//! A TCP proxy that can refuse traffic by *who sends it*: each connection is known by
//! its first chunk (an HTTP request's headers), and connections whose first chunk
//! contains a blocked marker are closed — open ones at once, new ones on arrival.
//! Only for protocols where the client speaks first (etcd's peer HTTP, whose requests
//! carry `X-Server-From: <member id>`).

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The proxy; it stops when dropped.
pub struct SenderFilterProxy {
    addr: SocketAddr,
    blocked: watch::Sender<Vec<Vec<u8>>>,
    accept_task: JoinHandle<()>,
}

impl SenderFilterProxy {
    /// Listens on a free loopback port and forwards to `target` (`host:port`).
    ///
    /// # Errors
    /// When the loopback port cannot be bound.
    pub async fn start(target: &str) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (blocked, _) = watch::channel(Vec::new());
        let accept_task = tokio::spawn(accept_loop(listener, target.to_owned(), blocked.clone()));
        Ok(Self {
            addr,
            blocked,
            accept_task,
        })
    }

    /// The address clients connect to.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every connection whose first chunk contains `marker` (an empty marker
    /// matches every connection), now and from now on.
    pub fn block(&self, marker: &[u8]) {
        self.blocked.send_modify(|b| b.push(marker.to_vec()));
    }

    /// Lets every connection through again.
    pub fn unblock_all(&self) {
        self.blocked.send_modify(Vec::clear);
    }
}

impl Drop for SenderFilterProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        // closes every open connection too
        self.block(b"");
    }
}

fn is_blocked(blocked: &[Vec<u8>], first: &[u8]) -> bool {
    blocked
        .iter()
        .any(|m| m.is_empty() || first.windows(m.len()).any(|w| w == m.as_slice()))
}

async fn accept_loop(listener: TcpListener, target: String, blocked: watch::Sender<Vec<Vec<u8>>>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let (rx, target) = (blocked.subscribe(), target.clone());
        tokio::spawn(serve(client, target, rx));
    }
}

async fn serve(mut client: TcpStream, target: String, mut blocked: watch::Receiver<Vec<Vec<u8>>>) {
    let mut first = vec![0u8; 16 * 1024];
    let n = match client.read(&mut first).await {
        Ok(0) | Err(_) => return,
        Ok(n) => n,
    };
    first.truncate(n);
    if is_blocked(&blocked.borrow_and_update(), &first) {
        return;
    }
    let Ok(mut server) = TcpStream::connect(&target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    if server.write_all(&first).await.is_err() {
        return;
    }
    let cut = async {
        loop {
            if blocked.changed().await.is_err() {
                return;
            }
            if is_blocked(&blocked.borrow_and_update(), &first) {
                return;
            }
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        () = cut => {}
    }
}
