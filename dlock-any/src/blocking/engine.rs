//! The runtime a blocking backend runs on, and the async values kept with it.

use std::future::Future;
use std::sync::Arc;
use std::sync::mpsc::sync_channel;
use std::time::Duration;

use dlock_core::LockError;

/// How long the last handle's drop waits for dropped guards' releases.
const SETTLE_ON_DROP: Duration = Duration::from_secs(5);

/// The runtime one blocking backend runs on.
pub(super) struct Engine {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Engine {
    pub(super) fn start() -> Result<Arc<Self>, LockError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("dlock-blocking")
            .enable_all()
            .build()
            .map_err(|e| LockError::unavailable("cannot start the blocking API's runtime", e))?;
        Ok(Arc::new(Self {
            runtime: Some(runtime),
        }))
    }

    /// Runs `work` on the runtime and blocks this thread for its answer. Spawned
    /// rather than `block_on`, so it works from any thread, async ones included,
    /// without tokio's nested-runtime panic.
    pub(super) fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, LockError>> + Send + 'static,
    ) -> Result<T, LockError> {
        let runtime = self.runtime()?;
        let (tx, rx) = sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        rx.recv()
            .map_err(|_| LockError::transient("the blocking API's runtime stopped"))?
    }

    pub(super) fn runtime(&self) -> Result<&tokio::runtime::Runtime, LockError> {
        self.runtime
            .as_ref()
            .ok_or_else(|| LockError::transient("the blocking API's runtime stopped"))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        // Inside a runtime (the last handle dropped in async code) this thread may be
        // the one that would run the clean-ups it waited for: do not block it.
        let inside_a_runtime = tokio::runtime::Handle::try_current().is_ok();
        if !inside_a_runtime && dlock_core::pending_cleanups() > 0 {
            let (tx, rx) = sync_channel(1);
            runtime.spawn(async move {
                let _ = tx.send(dlock_core::settle(SETTLE_ON_DROP).await);
            });
            let _ = rx.recv_timeout(SETTLE_ON_DROP + Duration::from_secs(1));
        }
        // never blocks, so dropping the last handle inside async code cannot panic
        runtime.shutdown_background();
    }
}

/// A value from the async API kept with the runtime it lives on, and dropped inside
/// it: a connection, guard or task handle may need the runtime to close.
pub(super) struct OnEngine<T> {
    value: Option<T>,
    pub(super) engine: Arc<Engine>,
}

impl<T> OnEngine<T> {
    pub(super) fn new(value: T, engine: Arc<Engine>) -> Self {
        Self {
            value: Some(value),
            engine,
        }
    }

    pub(super) fn get(&self) -> Result<&T, LockError> {
        self.value
            .as_ref()
            .ok_or_else(|| LockError::transient("already released"))
    }

    pub(super) fn take(&mut self) -> Result<T, LockError> {
        self.value
            .take()
            .ok_or_else(|| LockError::transient("already released"))
    }
}

impl<T> Drop for OnEngine<T> {
    fn drop(&mut self) {
        if let (Some(value), Ok(runtime)) = (self.value.take(), self.engine.runtime()) {
            let _inside = runtime.enter();
            drop(value);
        }
    }
}
