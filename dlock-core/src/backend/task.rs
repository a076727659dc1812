//! Background tasks that end with what owns them.

use std::future::Future;

use tokio::task::JoinHandle;

/// A spawned task aborted when this value is dropped: a notification listener or a
/// batching loop lives exactly as long as the client that started it.
#[derive(Debug)]
pub struct OwnedTask(JoinHandle<()>);

impl OwnedTask {
    /// Spawns `task` on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(task: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(tokio::spawn(task))
    }
}

impl Drop for OwnedTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
