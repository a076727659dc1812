//! The run's metrics: served at `--metrics-addr` by the exporter's own HTTP listener,
//! and written to `--metrics-textfile` for node_exporter's textfile collector — while
//! the lock is held (so a hung job can alert) and once more at exit (so a job too short
//! to be scraped is still seen).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dlock_any::LockName;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The builder with dlock's buckets: latencies with
/// [`dlock_any::metric_names::LATENCY_BUCKETS`], hold times with `HOLD_BUCKETS`
/// (summaries' client-side quantiles could not be added up across the hosts sharing a
/// lock).
fn builder() -> Result<PrometheusBuilder, String> {
    use dlock_any::metric_names::{HOLD, HOLD_BUCKETS, LATENCY_BUCKETS};
    use metrics_exporter_prometheus::Matcher;
    PrometheusBuilder::new()
        .set_buckets(LATENCY_BUCKETS)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(HOLD.to_owned()), HOLD_BUCKETS))
        .map_err(|e| format!("cannot set up metrics: {e}"))
}

/// Installs the Prometheus recorder, every metric described.
///
/// # Errors
/// When a recorder is installed already.
pub fn install() -> Result<PrometheusHandle, String> {
    let handle = builder()?
        .install_recorder()
        .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    dlock_any::metric_names::describe();
    Ok(handle)
}

/// Installs the recorder and, with `addr`, serves it there. A port that cannot be had
/// (taken, not allowed) is a warning: the job runs without the endpoint, never fails
/// for it.
///
/// # Errors
/// When the recorder cannot be installed.
pub fn start(addr: Option<&str>) -> Result<PrometheusHandle, String> {
    let Some(given) = addr else {
        return install();
    };
    // a host name (`localhost:9464`) resolved now; one that does not resolve is a
    // warning like a port that cannot be had
    let resolved = std::net::ToSocketAddrs::to_socket_addrs(given).map(|mut a| a.next());
    let addr: SocketAddr = match resolved {
        Ok(Some(a)) => a,
        Ok(None) | Err(_) => {
            eprintln!(
                "dlock: warning: cannot resolve {given:?} to serve metrics on; running without \
                 the endpoint"
            );
            return install();
        }
    };
    match builder()?.with_http_listener(addr).build() {
        Ok((recorder, exporter)) => {
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder)
                .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
            dlock_any::metric_names::describe();
            tokio::spawn(async move {
                if let Err(e) = exporter.await {
                    tracing::warn!(%addr, error = ?e, "metrics endpoint stopped");
                }
            });
            Ok(handle)
        }
        Err(e) => {
            eprintln!(
                "dlock: warning: cannot serve metrics on {addr} ({e}); running without the endpoint"
            );
            install()
        }
    }
}

/// Writes the metrics to `path` whole: a temporary file in the same directory renamed
/// over it, so node_exporter never reads half a file.
///
/// # Errors
/// When the directory cannot be written.
pub fn write_textfile(handle: &PrometheusHandle, path: &Path) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("not a file name"))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = dir.map_or_else(|| PathBuf::from(&temp_name), |d| d.join(&temp_name));
    std::fs::write(&temp, handle.render())?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// While a run holds `names`: their hold age every second, and the textfile (if any)
/// every ten. Never returns; drop it when the hold ends, then call [`Hold::ended`].
pub struct Hold {
    names: Vec<LockName>,
    backend: &'static str,
    handle: Option<PrometheusHandle>,
    textfile: Option<PathBuf>,
}

impl Hold {
    /// The hold of `names` on `backend`, with the recorder's `handle` if metrics are on.
    pub fn new(
        names: &[LockName],
        backend: &'static str,
        handle: Option<PrometheusHandle>,
        textfile: Option<PathBuf>,
    ) -> Self {
        Self {
            names: names.to_vec(),
            backend,
            handle,
            textfile,
        }
    }

    fn set_age(&self, seconds: f64) {
        for name in &self.names {
            metrics::gauge!(
                dlock_any::metric_names::HOLD_AGE,
                "backend" => self.backend,
                "lock" => name.as_str().to_owned()
            )
            .set(seconds);
        }
    }

    /// Updates the gauge and the textfile until dropped.
    pub async fn watch(&self) -> std::convert::Infallible {
        let started = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut n: u64 = 0;
        loop {
            tick.tick().await;
            self.set_age(started.elapsed().as_secs_f64());
            if n.is_multiple_of(10) {
                self.flush();
            }
            n += 1;
        }
    }

    /// The hold is over: the gauge goes to 0 and the textfile is written a last time.
    pub fn ended(&self) {
        self.set_age(0.0);
        self.flush();
    }

    /// Writes the textfile now, if there is one.
    pub fn flush(&self) {
        if let (Some(handle), Some(path)) = (&self.handle, &self.textfile)
            && let Err(e) = write_textfile(handle, path)
        {
            eprintln!(
                "dlock: warning: cannot write metrics to {}: {e}",
                path.display()
            );
        }
    }
}
