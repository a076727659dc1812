//! Sessions by TTL: a ZooKeeper lease lives as long as its session, so a lock asked for
//! with a TTL goes on a session whose timeout is that TTL (as etcd shares one lease per
//! TTL). A client holds one session per TTL it has been asked for, each with its own
//! renewal queue; the server clamps each timeout to its `[minSessionTimeout,
//! maxSessionTimeout]`, and leases report what it granted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::millis_u64;

use crate::renewals::{self, Renewals};
use crate::session::{Params, Session};

/// One session and the queue that batches its renewals.
pub(crate) struct Slot {
    pub(crate) session: Arc<Session>,
    pub(crate) renewals: Renewals,
}

impl Slot {
    async fn open(params: Params) -> Result<Arc<Self>, LockError> {
        let session = Arc::new(Session::open(params).await?);
        Ok(Arc::new(Self {
            renewals: renewals::start(Arc::clone(&session)),
            session,
        }))
    }
}

/// Every session of one client.
pub(crate) struct Sessions {
    params: Params,
    /// A session timeout set by the caller (`session_timeout=`): every lock uses the
    /// first session, whatever its TTL.
    pinned: bool,
    /// The session opened at connect (the default timeout, or the pinned one).
    first: Arc<Slot>,
    by_ttl: Mutex<HashMap<u64, Arc<Slot>>>,
    /// One session opened at a time, so two first acquires of a TTL share one.
    opening: tokio::sync::Mutex<()>,
}

/// Requested TTLs are grouped in steps of this many milliseconds, so a caller whose TTL
/// varies by a few milliseconds does not open a session each time.
const STEP_MS: u64 = 100;

impl Sessions {
    pub(crate) async fn open(params: Params, pinned: bool) -> Result<Self, LockError> {
        Ok(Self {
            first: Slot::open(params.clone()).await?,
            params,
            pinned,
            by_ttl: Mutex::new(HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
        })
    }

    /// The servers and the session timeout asked for.
    pub(crate) fn asked(&self) -> (&str, Duration) {
        (&self.params.hosts, self.params.session_timeout)
    }

    /// The session opened at connect: for operations that hold nothing.
    pub(crate) fn first(&self) -> &Arc<Slot> {
        &self.first
    }

    /// The session a lock with `ttl` goes on, opened the first time it is asked for.
    pub(crate) async fn for_ttl(&self, ttl: Duration) -> Result<Arc<Slot>, LockError> {
        let ms = millis_u64(ttl).div_ceil(STEP_MS).saturating_mul(STEP_MS);
        let first_ms = millis_u64(self.params.session_timeout);
        if self.pinned || ms == first_ms {
            return Ok(Arc::clone(&self.first));
        }
        if let Some(s) = self.slot(ms) {
            return Ok(s);
        }
        let _one_at_a_time = self.opening.lock().await;
        if let Some(s) = self.slot(ms) {
            return Ok(s);
        }
        let params = Params {
            session_timeout: Duration::from_millis(ms),
            ..self.params.clone()
        };
        let slot = Slot::open(params).await?;
        self.slots().insert(ms, Arc::clone(&slot));
        Ok(slot)
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.by_ttl.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, ms: u64) -> Option<Arc<Slot>> {
        self.slots().get(&ms).cloned()
    }

    /// Whether `slot` is one of this client's sessions.
    pub(crate) fn owns(&self, slot: &Arc<Slot>) -> bool {
        Arc::ptr_eq(slot, &self.first) || self.slots().values().any(|s| Arc::ptr_eq(s, slot))
    }

    pub(crate) fn op_timeout(&self) -> Duration {
        self.params.op_timeout
    }

    pub(crate) fn authenticated(&self) -> bool {
        self.params.auth.is_some()
    }
}
