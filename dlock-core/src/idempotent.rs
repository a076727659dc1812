//! Exactly-once effects on top of a lock: a request id's work runs once, and its result
//! is handed to every later caller.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::{DistributedLock, FencingToken, LockError, LockGuard, LockName};

/// Where [`Idempotent`] keeps finished requests' results, fenced by the runner's token.
#[async_trait]
pub trait ResultStore: Send + Sync {
    /// Marks `request` as being run under `token`, kept at least `retain`: from now on
    /// a lower token can no longer record a result for it. A result still retained
    /// stays (the caller looks for it next).
    ///
    /// # Errors
    /// [`LockError::StaleToken`] when a higher token has begun already; a backend error.
    ///
    /// # Cancel safety
    /// Dropping it after the request was sent may or may not have marked the request
    /// begun; a retry with the same token is harmless.
    async fn begin(
        &self,
        request: &str,
        token: FencingToken,
        retain: Duration,
    ) -> Result<(), LockError>;

    /// Records `result` for `request`, kept for `retain` — only if no higher token has
    /// begun or recorded since (a crashed runner's late write is refused).
    ///
    /// # Errors
    /// [`LockError::StaleToken`]; a backend error.
    ///
    /// # Cancel safety
    /// Dropping it after the request was sent may or may not have recorded the result;
    /// a retry with the same token records the same result.
    async fn record(
        &self,
        request: &str,
        token: FencingToken,
        result: &[u8],
        retain: Duration,
    ) -> Result<(), LockError>;

    /// The recorded result of `request`, while retained.
    ///
    /// # Errors
    /// A backend error.
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    async fn result(&self, request: &str) -> Result<Option<Vec<u8>>, LockError>;
}

/// What [`Idempotent::run_once`] did.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome<E> {
    /// This call ran the work; its result is recorded.
    Ran(Vec<u8>),
    /// An earlier run finished: its recorded result, the work not run again.
    Done(Vec<u8>),
    /// Another caller is running it now (and `wait` ran out).
    InProgress,
    /// The work failed: nothing recorded, so a later call runs it again.
    Failed(E),
}

/// Runs each request id's work at most once at a time and, once it succeeded, never
/// again while its result is retained: the lock of `idempotent/<id>` admits one runner,
/// whose fencing token guards the result it records — a runner whose lease ran out
/// mid-work (a pause, a partition) cannot overwrite the result of the one that took
/// over.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use dlock_core::{Idempotent, MemoryLock, MemoryResults, Outcome};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_core::LockError> {
/// let once = Idempotent::new(Arc::new(MemoryLock::new()), Arc::new(MemoryResults::new()))
///     .with_retention(Duration::from_secs(24 * 3600));
/// let charge = |_token| async { Ok::<_, String>(b"charged 42.00".to_vec()) };
/// assert!(matches!(once.run_once("payment/981", charge).await?, Outcome::Ran(_)));
/// let again = once.run_once("payment/981", charge).await?; // a retried request
/// assert_eq!(again, Outcome::Done(b"charged 42.00".to_vec()));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Idempotent {
    lock: Arc<dyn DistributedLock>,
    results: Arc<dyn ResultStore>,
    ttl: Duration,
    retain: Duration,
    wait: Duration,
}

impl Idempotent {
    /// Requests locked on `lock`, results kept in `results` for a day, runner leases
    /// of 30 s (renewed while the work runs), and no waiting for a running request.
    #[must_use]
    pub fn new(lock: Arc<dyn DistributedLock>, results: Arc<dyn ResultStore>) -> Self {
        Self {
            lock,
            results,
            ttl: crate::DEFAULT_TTL,
            retain: Duration::from_secs(24 * 3600),
            wait: Duration::ZERO,
        }
    }

    /// The runner's lease TTL: how soon a crashed runner's request can be taken over.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long a finished request's result is kept (and the request not run again).
    #[must_use]
    pub fn with_retention(mut self, retain: Duration) -> Self {
        self.retain = retain;
        self
    }

    /// How long a caller waits for a running request to finish instead of getting
    /// [`Outcome::InProgress`].
    #[must_use]
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Runs `work` for `request` unless it ran already (its recorded result is
    /// returned) or runs now elsewhere. `work` gets the run's fencing token — pass it
    /// to the stores the work writes to. The work is never cancelled halfway; if the
    /// runner's lease ran out meanwhile and another runner took over, this run's
    /// result is refused ([`LockError::StaleToken`]).
    ///
    /// # Errors
    /// [`LockError::InvalidName`] for an id that makes no lock name;
    /// [`LockError::Unavailable`] when the lock service is down (a fallback lease is
    /// never used: it cannot exclude other hosts);
    /// [`LockError::StaleToken`] when another runner took the request over meanwhile
    /// (its result stands, this one is not recorded); a backend error.
    ///
    /// # Cancel safety
    /// Dropping it abandons the run where it stands: a work half done stays unrecorded,
    /// and the request's lock is held until its TTL, after which another call runs the
    /// work again — so the work's effects must carry its token (a fenced write), as
    /// they must for a crash.
    pub async fn run_once<F, Fut, E>(&self, request: &str, work: F) -> Result<Outcome<E>, LockError>
    where
        F: FnOnce(FencingToken) -> Fut,
        Fut: Future<Output = Result<Vec<u8>, E>>,
    {
        let name = LockName::new(&format!("idempotent/{request}"))?;
        if let Some(done) = self.results.result(request).await? {
            return Ok(Outcome::Done(done));
        }
        let lease = if self.wait.is_zero() {
            match self.lock.try_acquire(&name, self.ttl).await? {
                Some(l) => l,
                None => return Ok(Outcome::InProgress),
            }
        } else {
            match self.lock.acquire(&name, self.ttl, self.wait).await {
                Ok(l) => l,
                Err(LockError::Timeout { .. }) => return Ok(Outcome::InProgress),
                Err(e) => return Err(e),
            }
        };
        if lease.fallback().is_some() {
            // a fallback excludes this process at most: other hosts would run it too
            let _ = self.lock.release(&lease).await;
            return Err(LockError::transient(format!(
                "{request} cannot be run exactly once while the lock service is unreachable"
            )));
        }
        let guard = LockGuard::new(Arc::clone(&self.lock), lease);
        let ran = self.run(request, &guard, work).await;
        if let Err(e) = guard.release().await {
            tracing::warn!(request, error = %e, "release after an idempotent run failed; the lease expires by its TTL");
        }
        ran
    }

    async fn run<F, Fut, E>(
        &self,
        request: &str,
        guard: &LockGuard,
        work: F,
    ) -> Result<Outcome<E>, LockError>
    where
        F: FnOnce(FencingToken) -> Fut,
        Fut: Future<Output = Result<Vec<u8>, E>>,
    {
        // From here no earlier runner can record; one may have finished between the
        // first look and this lease, so look again.
        let token = guard.token();
        self.results.begin(request, token, self.retain).await?;
        if let Some(done) = self.results.result(request).await? {
            return Ok(Outcome::Done(done));
        }
        // The work is not cancelled when the lease is lost: stopping it halfway (a
        // charge sent, its answer not yet read) would leave a done effect unrecorded.
        // Its result is recorded under its token regardless — refused, with
        // StaleToken, only if another runner took the request over meanwhile.
        match work(token).await {
            Ok(result) => {
                self.record(request, token, &result).await?;
                Ok(Outcome::Ran(result))
            }
            Err(e) => Ok(Outcome::Failed(e)),
        }
    }
}

impl Idempotent {
    /// Records a run's result, retrying an outage a few times: the same token may
    /// record again, so a retry after an unanswered attempt is harmless.
    async fn record(
        &self,
        request: &str,
        token: FencingToken,
        result: &[u8],
    ) -> Result<(), LockError> {
        let mut pause = Duration::from_millis(50);
        for _ in 0..4 {
            match self
                .results
                .record(request, token, result, self.retain)
                .await
            {
                Err(LockError::Unavailable { .. }) => {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                done => return done,
            }
        }
        self.results
            .record(request, token, result, self.retain)
            .await
    }
}

/// Results in this process's memory: for tests, and as the pattern to copy.
#[derive(Clone, Default)]
pub struct MemoryResults {
    records: Arc<Mutex<HashMap<String, Record>>>,
}

struct Record {
    token: u64,
    result: Option<(Vec<u8>, Instant)>,
}

impl MemoryResults {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `request`'s record with its fence raised to `token`, or `StaleToken` when a later
/// token has been there.
fn raise<'a>(
    records: &'a mut HashMap<String, Record>,
    request: &str,
    token: FencingToken,
) -> Result<&'a mut Record, LockError> {
    crate::require_real_token(request, token)?;
    let r = records.entry(request.to_owned()).or_insert(Record {
        token: 0,
        result: None,
    });
    if token.get() < r.token {
        return Err(LockError::stale_token(request, Some(r.token), token));
    }
    r.token = token.get();
    Ok(r)
}

#[async_trait]
impl ResultStore for MemoryResults {
    async fn begin(
        &self,
        request: &str,
        token: FencingToken,
        _retain: Duration,
    ) -> Result<(), LockError> {
        raise(&mut self.records(), request, token).map(drop)
    }

    async fn record(
        &self,
        request: &str,
        token: FencingToken,
        result: &[u8],
        retain: Duration,
    ) -> Result<(), LockError> {
        let mut records = self.records();
        let r = raise(&mut records, request, token)?;
        let until = Instant::now()
            .checked_add(retain)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
        r.result = Some((result.to_vec(), until));
        Ok(())
    }

    async fn result(&self, request: &str) -> Result<Option<Vec<u8>>, LockError> {
        let now = Instant::now();
        Ok(self
            .records()
            .get(request)
            .and_then(|r| r.result.as_ref())
            .filter(|(_, until)| *until > now)
            .map(|(v, _)| v.clone()))
    }
}
