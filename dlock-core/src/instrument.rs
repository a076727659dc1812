//! Tracing spans and metrics around any backend.

use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument as _;

use crate::{Acquisition, DistributedLock, Lease, LockError, LockName};

/// The metric names dlock records (through the `metrics` facade: install any recorder
/// or exporter to collect them; without one they cost next to nothing).
///
/// Every metric has a `backend` label (`redis`, `postgres`, …). With
/// [`Instrumented::with_name_label`] (and [`crate::Locker::with_name_label`]) they
/// also get a `lock` label: mind the cardinality — one series per lock name.
pub mod names {
    /// Histogram: seconds a `try_acquire` call took (one attempt).
    pub const ACQUIRE_LATENCY: &str = "dlock_acquire_latency_seconds";
    /// Histogram: seconds an `acquire` call waited, whatever its outcome.
    pub const ACQUIRE_WAIT: &str = "dlock_acquire_wait_seconds";
    /// Counter: acquisitions by `outcome` = `acquired` | `busy` | `timeout` | `error`.
    pub const ACQUIRE_TOTAL: &str = "dlock_acquire_total";
    /// Counter: renewals by `outcome` = `ok` | `lost` | `error`.
    pub const RENEW_TOTAL: &str = "dlock_renew_total";
    /// Counter: releases by `outcome` = `released` | `not_held` | `error`.
    pub const RELEASE_TOTAL: &str = "dlock_release_total";
    /// Histogram: seconds a [`crate::LockGuard`] held its lock (until release, loss or drop).
    pub const HOLD: &str = "dlock_hold_seconds";
    /// Counter: guards whose lease was lost.
    pub const LEASES_LOST: &str = "dlock_leases_lost_total";
    /// Counter: guards dropped without `release()`.
    pub const GUARDS_DROPPED: &str = "dlock_guards_dropped_total";
    /// Gauge: `acquire` calls waiting right now (the length of the queue this process
    /// adds to a lock; sum it over the hosts that share one).
    pub const WAITERS: &str = "dlock_waiters";
    /// Gauge: seconds the current hold of `lock` has lasted, while it is held (`dlock
    /// run` sets it every second, and to 0 once released), so a hold that runs too long
    /// can alert while it runs — [`HOLD`] is recorded only when a hold ends.
    pub const HOLD_AGE: &str = "dlock_hold_age_seconds";

    /// Histogram buckets, in seconds, suited to lock latencies: 50 µs (a Redis round
    /// trip on one host) to 60 s (a long wait for a busy lock), about three per decade.
    /// Export the histograms with them (rather than as client-side summaries, whose
    /// quantiles cannot be added up across the hosts that share a lock).
    pub const LATENCY_BUCKETS: &[f64] = &[
        0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
        0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ];

    /// Histogram buckets, in seconds, for [`HOLD`]: how long a lock is held runs from
    /// milliseconds (a request's critical section) to hours (a nightly job), so its
    /// buckets reach a day — an alert on a p99 hold of 5 minutes must be able to fire.
    pub const HOLD_BUCKETS: &[f64] = &[
        0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
        7200.0, 21_600.0, 86_400.0,
    ];

    /// Gives every metric above its unit and help text in the installed recorder (a
    /// Prometheus exporter prints them as `# HELP` lines). Call it once, after
    /// installing the recorder.
    pub fn describe() {
        use metrics::Unit;
        metrics::describe_histogram!(
            ACQUIRE_LATENCY,
            Unit::Seconds,
            "Time one try_acquire call took (a single attempt)."
        );
        metrics::describe_histogram!(
            ACQUIRE_WAIT,
            Unit::Seconds,
            "Time an acquire call waited, whatever its outcome."
        );
        metrics::describe_counter!(
            ACQUIRE_TOTAL,
            "Acquisitions by outcome: acquired, busy, timeout, lost or error."
        );
        metrics::describe_counter!(
            RENEW_TOTAL,
            "Renewals by outcome: ok, lost (the lease was gone) or error."
        );
        metrics::describe_counter!(
            RELEASE_TOTAL,
            "Releases by outcome: released, not_held or error."
        );
        metrics::describe_histogram!(
            HOLD,
            Unit::Seconds,
            "Time a lock guard held its lock, until release, loss or drop."
        );
        metrics::describe_counter!(LEASES_LOST, "Lock guards whose lease was lost.");
        metrics::describe_counter!(GUARDS_DROPPED, "Lock guards dropped without release().");
        metrics::describe_gauge!(WAITERS, "acquire calls waiting for a lock right now.");
        metrics::describe_gauge!(
            HOLD_AGE,
            Unit::Seconds,
            "How long the current hold of the lock has lasted (0 once released)."
        );
    }
}

/// Counts one waiting `acquire` in [`names::WAITERS`] until dropped, so a cancelled
/// call leaves the gauge too.
struct Waiting(Vec<metrics::Label>);

impl Waiting {
    fn start(labels: Vec<metrics::Label>) -> Self {
        metrics::gauge!(names::WAITERS, labels.clone()).increment(1.0);
        Self(labels)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        metrics::gauge!(names::WAITERS, std::mem::take(&mut self.0)).decrement(1.0);
    }
}

/// Labels for one lock operation: backend always, lock name when asked for.
pub(crate) fn labels(
    backend: &'static str,
    name: &LockName,
    with_name: bool,
) -> Vec<metrics::Label> {
    // room for the name and the one label `with` adds: no reallocation per operation
    let mut l = Vec::with_capacity(3);
    l.push(metrics::Label::new("backend", backend));
    if with_name {
        l.push(metrics::Label::new("lock", name.as_str().to_owned()));
    }
    l
}

fn with(
    mut labels: Vec<metrics::Label>,
    key: &'static str,
    value: &'static str,
) -> Vec<metrics::Label> {
    labels.push(metrics::Label::new(key, value));
    labels
}

/// Wraps a backend with `tracing` spans (`dlock.acquire`, `dlock.try_acquire`,
/// `dlock.renew`, `dlock.release`, with the lock name, backend and outcome) and the
/// metrics in [`names`]. `dlock_any::connect` applies it to every backend it returns,
/// so adapters stay free of it and third-party adapters get it too.
///
/// ```
/// use std::sync::Arc;
/// use dlock_core::{DistributedLock, Instrumented, MemoryLock};
/// let lock: Arc<dyn DistributedLock> = Arc::new(Instrumented::new(MemoryLock::new()));
/// assert_eq!(lock.backend_name(), "memory");
/// ```
#[derive(Clone, Debug)]
pub struct Instrumented<L> {
    inner: L,
    name_label: bool,
}

impl<L: DistributedLock> Instrumented<L> {
    /// Counts a release (plain or lingering) by its outcome.
    fn count_release(&self, span: &tracing::Span, lease: &Lease, r: &Result<bool, LockError>) {
        let outcome = match r {
            Ok(true) => "released",
            Ok(false) => "not_held",
            Err(_) => "error",
        };
        span.record("outcome", outcome);
        metrics::counter!(
            names::RELEASE_TOTAL,
            with(self.labels(lease.name()), "outcome", outcome)
        )
        .increment(1);
    }

    /// Instruments `inner`.
    pub fn new(inner: L) -> Self {
        Self {
            inner,
            name_label: false,
        }
    }

    /// Adds the lock name as a `lock` label (one series per name: mind the cardinality).
    #[must_use]
    pub fn with_name_label(mut self, on: bool) -> Self {
        self.name_label = on;
        self
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// One attempt, as a `dlock.try_acquire` span and the attempt's latency.
    async fn attempt(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        let name = request.name();
        let span = tracing::debug_span!("dlock.try_acquire", lock = %name, backend = self.inner.backend_name(), access = %request.access(), outcome = tracing::field::Empty);
        let start = Instant::now();
        let r = self
            .inner
            .acquire_with(request)
            .instrument(span.clone())
            .await;
        let outcome = match &r {
            Ok(Some(_)) => "acquired",
            Ok(None) => "busy",
            Err(e) => outcome_of_error(e),
        };
        span.record("outcome", outcome);
        let labels = self.labels(name);
        metrics::histogram!(names::ACQUIRE_LATENCY, labels.clone())
            .record(start.elapsed().as_secs_f64());
        metrics::counter!(names::ACQUIRE_TOTAL, with(labels, "outcome", outcome)).increment(1);
        r
    }

    /// A wait, as a `dlock.acquire` span, the waiters gauge while it waits, and how
    /// long it waited.
    async fn wait_for(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        let name = request.name();
        let span = tracing::info_span!(
            "dlock.acquire",
            lock = %name,
            backend = self.inner.backend_name(),
            access = %request.access(),
            wait_ms = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let start = Instant::now();
        let waiting = Waiting::start(self.labels(name));
        let r = self
            .inner
            .acquire_with(request)
            .instrument(span.clone())
            .await;
        drop(waiting);
        let waited = start.elapsed();
        let outcome = match &r {
            Ok(Some(_)) => "acquired",
            Ok(None) => "timeout",
            Err(e) => outcome_of_error(e),
        };
        span.record(
            "wait_ms",
            u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        );
        span.record("outcome", outcome);
        let labels = self.labels(name);
        metrics::histogram!(names::ACQUIRE_WAIT, labels.clone()).record(waited.as_secs_f64());
        metrics::counter!(names::ACQUIRE_TOTAL, with(labels, "outcome", outcome)).increment(1);
        r
    }

    fn labels(&self, name: &LockName) -> Vec<metrics::Label> {
        labels(self.inner.backend_name(), name, self.name_label)
    }
}

fn outcome_of_error(e: &LockError) -> &'static str {
    match e {
        LockError::Timeout { .. } => "timeout",
        LockError::LeaseLost { .. } => "lost",
        _ => "error",
    }
}

impl<L: DistributedLock> crate::Delegating for Instrumented<L> {
    type Inner = L;

    fn delegate(&self) -> &L {
        &self.inner
    }
}

// Acquiring, renewing and releasing are measured; the rest forwards.
crate::delegate_lock! {
    impl [L: DistributedLock] for Instrumented<L>;
    forward [inspect, hand_over, resume, proclaim, list, diagnose, break_holder, revoke_holder, holders,
        holder_changed, capabilities, backend_name];
    {
        async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
            match request.wait() {
                None => self.attempt(request).await,
                Some(_) => self.wait_for(request).await,
            }
        }

        async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
            let span = tracing::debug_span!("dlock.renew", lock = %lease.name(), backend = self.inner.backend_name(), outcome = tracing::field::Empty);
            let r = self.inner.renew(lease).instrument(span.clone()).await;
            let outcome = match &r {
                Ok(_) => "ok",
                Err(e) => outcome_of_error(e),
            };
            span.record("outcome", outcome);
            metrics::counter!(
                names::RENEW_TOTAL,
                with(self.labels(lease.name()), "outcome", outcome)
            )
            .increment(1);
            r
        }

        async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
            let span = tracing::debug_span!("dlock.release", lock = %lease.name(), backend = self.inner.backend_name(), outcome = tracing::field::Empty);
            let r = self.inner.release(lease).instrument(span.clone()).await;
            self.count_release(&span, lease, &r);
            r
        }

        async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
            let span = tracing::debug_span!("dlock.release", lock = %lease.name(), backend = self.inner.backend_name(), linger_ms = u64::try_from(linger.as_millis()).unwrap_or(u64::MAX), outcome = tracing::field::Empty);
            let r = self
                .inner
                .release_after(lease, linger)
                .instrument(span.clone())
                .await;
            self.count_release(&span, lease, &r);
            r
        }
    }
}
