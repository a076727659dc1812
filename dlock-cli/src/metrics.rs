//! `--metrics-addr`: Prometheus text over plain HTTP.

use std::net::SocketAddr;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Installs the Prometheus recorder: latencies as histograms with
/// [`dlock_any::metric_names::LATENCY_BUCKETS`], hold times with `HOLD_BUCKETS`
/// (summaries' client-side quantiles could not be added up across the hosts sharing a
/// lock), every metric described.
pub fn install() -> Result<PrometheusHandle, String> {
    use dlock_any::metric_names::{HOLD, HOLD_BUCKETS, LATENCY_BUCKETS};
    use metrics_exporter_prometheus::Matcher;
    let handle = PrometheusBuilder::new()
        .set_buckets(LATENCY_BUCKETS)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(HOLD.to_owned()), HOLD_BUCKETS))
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    dlock_any::metric_names::describe();
    Ok(handle)
}

/// Installs the Prometheus recorder ([`install`]) and serves its text on `addr` (any
/// path) until the process exits.
pub async fn serve(addr: SocketAddr) -> Result<(), String> {
    let handle = install()?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} for metrics: {e}"))?;
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(respond(conn, handle.clone()));
        }
    });
    Ok(())
}

async fn respond(mut conn: tokio::net::TcpStream, handle: PrometheusHandle) {
    // The request itself does not matter: every path answers with the metrics.
    let mut buf = [0u8; 2048];
    let _ = conn.read(&mut buf).await;
    let body = handle.render();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes()).await;
    let _ = conn.write_all(body.as_bytes()).await;
}
