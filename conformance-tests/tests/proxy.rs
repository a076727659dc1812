//! The fault proxy itself, against a loopback echo server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly

use std::time::{Duration, Instant};

use dlock_conformance::{FaultMode, FaultProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn echo_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    s.write_all(msg).await?;
    let mut got = vec![0u8; msg.len()];
    s.read_exact(&mut got).await?;
    Ok(got)
}

#[tokio::test]
async fn passes_traffic_through() {
    let proxy = FaultProxy::start(&echo_server().await).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut s, b"hello").await.unwrap(), b"hello");
}

#[tokio::test]
async fn delay_adds_latency_in_both_directions() {
    let proxy = FaultProxy::start(&echo_server().await).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    round_trip(&mut s, b"warm").await.unwrap();
    proxy.set_mode(FaultMode::Delay(Duration::from_millis(100)));
    let t = Instant::now();
    assert_eq!(round_trip(&mut s, b"slow").await.unwrap(), b"slow");
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn blackhole_holds_traffic_until_healed() {
    let proxy = FaultProxy::start(&echo_server().await).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    round_trip(&mut s, b"warm").await.unwrap();
    proxy.set_mode(FaultMode::Blackhole);
    s.write_all(b"held").await.unwrap();
    let mut buf = [0u8; 4];
    let r = tokio::time::timeout(Duration::from_millis(300), s.read_exact(&mut buf)).await;
    assert!(r.is_err(), "no reply may pass a blackhole");
    // a new connection is accepted but not served either
    let mut s2 = TcpStream::connect(proxy.addr()).await.unwrap();
    s2.write_all(b"new!").await.unwrap();
    let mut buf2 = [0u8; 4];
    let r2 = tokio::time::timeout(Duration::from_millis(300), s2.read_exact(&mut buf2)).await;
    assert!(r2.is_err());
    proxy.set_mode(FaultMode::Pass);
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"held");
    tokio::time::timeout(Duration::from_secs(5), s2.read_exact(&mut buf2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf2, b"new!");
}

#[tokio::test]
async fn reset_drops_open_connections_but_not_new_ones() {
    let proxy = FaultProxy::start(&echo_server().await).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    round_trip(&mut s, b"warm").await.unwrap();
    proxy.reset();
    let mut buf = [0u8; 8];
    let r = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap();
    assert!(
        matches!(r, Ok(0) | Err(_)),
        "connection must be closed: {r:?}"
    );
    let mut s2 = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut s2, b"again").await.unwrap(), b"again");
}
