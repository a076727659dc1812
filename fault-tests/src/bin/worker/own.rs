//! The workers that write to the backend's own store through its fence helpers.

use std::process::ExitCode;
use std::time::Duration;

use dlock_any::{FencingToken, Idempotent, Lease, LockError, LockName, Outcome};
use dlock_faults::own_store::OwnStore;
use dlock_faults::own_store::counter::{appended, counter_key, tokens};
use dlock_faults::own_store::effects::request_id;
use dlock_faults::store::mono;

use crate::{Store, nanos};

/// What a worker on the backend's own store was asked to do.
pub(crate) struct Worker<'a> {
    pub url: &'a str,
    pub name: &'a LockName,
    pub id: &'a str,
    pub ttl: Duration,
    /// How long a holder (a runner) works between its read (look) and its write.
    pub hold: Duration,
    /// Through the fence helpers, or plainly (the control runs).
    pub fenced: bool,
}

/// A refusal by the fence or the guard, as opposed to a failure to reach the store
/// (whose outcome is unknown: it is not reported, and the store's own record tells).
fn refused(e: &LockError) -> bool {
    matches!(
        e,
        LockError::StaleToken { .. } | LockError::LeaseLost { .. }
    )
}

/// Reports an acquisition: token, when, valid until when, how held.
async fn acquired(store: &mut Store, id: &str, token: u64, valid: Duration, access: char) -> bool {
    let now = mono();
    let msg = format!(
        "ACQ {id} {token} {} {} {access}",
        nanos(now),
        nanos(now + valid)
    );
    store.ask(msg).await.is_some()
}

/// Request numbers: the current 200 ms slot (every worker calls the same request for a
/// while), or one time in four a retry of one of the ten before it.
fn request_number() -> u64 {
    let slot = u64::try_from(mono().as_millis() / 200).unwrap_or(0);
    let r = dlock_any::random_u64();
    if r.is_multiple_of(4) {
        slot.saturating_sub(1 + (r >> 8) % 10)
    } else {
        slot
    }
}

impl Worker<'_> {
    async fn connect(&self) -> Box<OwnStore> {
        loop {
            match Box::pin(OwnStore::connect(self.url)).await {
                Ok(own) => return Box::new(own),
                Err(e) => {
                    eprintln!("worker {}: connect failed ({e}); retrying", self.id);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    /// Takes the mutex over and over; under it reads the counter's history through the
    /// store's fence helper, holds, and writes it back with its token appended.
    pub(crate) async fn counter(&self, mut store: Store) -> ExitCode {
        let own = self.connect().await;
        let lock = own.lock();
        let key = counter_key(self.name.as_str());
        loop {
            let lease = match lock
                .acquire(self.name, self.ttl, Duration::from_secs(5))
                .await
            {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("worker {}: acquire failed: {e}", self.id);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            if !self.update(&own, &key, &lease, &mut store).await {
                return ExitCode::SUCCESS; // the runner is gone
            }
            let _ = lock.release(&lease).await;
        }
    }

    async fn update(&self, own: &OwnStore, key: &str, lease: &Lease, store: &mut Store) -> bool {
        let (id, t) = (self.id, lease.token().get());
        if !acquired(store, id, t, lease.remaining(), 'x').await {
            return false;
        }
        // As with the runner's store, the worker never checks its own lease: refusing a
        // stale holder is the helper's job.
        match own.read_counter(key, lease, self.fenced).await {
            Ok(history) => {
                let n = tokens(&history).map_or(0, |t| t.len());
                if store.ask(format!("RREAD {id} {t} {n} 1")).await.is_none() {
                    return false;
                }
                tokio::time::sleep(self.hold).await;
                let next = appended(&history, t);
                match own.write_counter(key, lease, &next, self.fenced).await {
                    Ok(()) => {
                        let _ = store.ask(format!("RWRITE {id} {t} {} 1", n + 1)).await;
                    }
                    Err(e) if refused(&e) => {
                        let _ = store.ask(format!("RWRITE {id} {t} {} 0", n + 1)).await;
                    }
                    Err(e) => eprintln!("worker {id}: write failed: {e}"),
                }
            }
            Err(e) if refused(&e) => {
                let _ = store.ask(format!("RREAD {id} {t} 0 0")).await;
            }
            Err(e) => eprintln!("worker {id}: read failed: {e}"),
        }
        let done = mono();
        store
            .ask(format!("REL {id} {t} {}", nanos(done)))
            .await
            .is_some()
    }

    /// Calls requests through `Idempotent::run_once` over and over; each run's work
    /// looks for the request's effect, holds (where the faults strike), then applies it.
    pub(crate) async fn once(&self, mut store: Store) -> ExitCode {
        let own = self.connect().await;
        let Some(results) = own.results() else {
            eprintln!(
                "worker {}: {} keeps no idempotency results",
                self.id, self.url
            );
            return ExitCode::from(2);
        };
        let once = Idempotent::new(own.lock(), results)
            .with_ttl(self.ttl)
            .with_retention(Duration::from_secs(600));
        let id = self.id;
        loop {
            let k = request_number();
            let request = request_id(self.name.as_str(), k);
            let reporter = &mut store;
            let (own, request_ref) = (&*own, &request);
            let outcome = once
                .run_once(&request, |token| async move {
                    let t = token.get();
                    let _ = acquired(reporter, id, t, self.ttl, 'o').await;
                    let effect = self.work(own, reporter, k, request_ref, token).await;
                    let _ = reporter
                        .ask(format!("REL {id} {t} {}", nanos(mono())))
                        .await;
                    effect.map(|e| e.to_string().into_bytes())
                })
                .await;
            let report = match outcome {
                Ok(Outcome::Ran(v)) => Some((v, 'R')),
                Ok(Outcome::Done(v)) => Some((v, 'D')),
                Err(LockError::StaleToken { .. }) => Some((b"0".to_vec(), 'S')),
                Ok(_) => None, // in progress elsewhere, or the work failed
                Err(e) => {
                    eprintln!("worker {id}: run_once failed: {e}");
                    None
                }
            };
            if let Some((v, how)) = report {
                let effect = String::from_utf8_lossy(&v).into_owned();
                if store
                    .ask(format!("RES {id} {effect} {k} {how}"))
                    .await
                    .is_none()
                {
                    return ExitCode::SUCCESS;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A request's work: look for an earlier runner's effect, work a while (where the
    /// faults strike: the runner reports a read first, as the counter's do), apply the
    /// effect. The token of the effect that stands.
    async fn work(
        &self,
        own: &OwnStore,
        reporter: &mut Store,
        k: u64,
        request: &str,
        token: FencingToken,
    ) -> Result<u64, LockError> {
        let (id, t) = (self.id, token.get());
        let applied = match own.look_effect(request, token, self.fenced).await {
            Ok(Some(earlier)) => {
                let _ = reporter.ask(format!("EFF {id} {t} {k} f")).await;
                return Ok(earlier);
            }
            Ok(None) => {
                let _ = reporter.ask(format!("RREAD {id} {t} {k} 1")).await; // mid-work
                tokio::time::sleep(self.hold).await;
                own.apply_effect(request, token, self.fenced).await
            }
            Err(e) => Err(e),
        };
        match &applied {
            Ok(()) => {
                let _ = reporter.ask(format!("EFF {id} {t} {k} n")).await;
            }
            Err(e) if refused(e) => {
                let _ = reporter.ask(format!("EFF {id} {t} {k} -")).await;
            }
            Err(e) => eprintln!("worker {id}: effect of {request} failed: {e}"),
        }
        applied.map(|()| t)
    }
}
