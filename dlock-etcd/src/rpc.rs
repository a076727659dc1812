//! Every RPC within the operation's deadline, retried across endpoints while it fails
//! transiently (core's `retry_within`).

use std::future::Future;

use dlock_core::LockError;
use etcd_client::Client;

use crate::EtcdLock;
use crate::errors::{from_etcd, is_transient};

impl EtcdLock {
    /// Runs an RPC, retrying transient failures (a dead endpoint in the list makes a
    /// share of requests fail) until the operation's deadline.
    pub(crate) async fn rpc<T, F, Fut>(&self, what: &str, call: F) -> Result<T, LockError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.rpc_attempts(what, call).await.map(|(v, _)| v)
    }

    /// As [`EtcdLock::rpc`], and whether the answer came from the first attempt (no
    /// earlier attempt can still land on the server).
    pub(crate) async fn rpc_attempts<T, F, Fut>(
        &self,
        what: &str,
        mut call: F,
    ) -> Result<(T, bool), LockError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        // boxed: etcd-client's request futures are large, and every operation's future
        // would carry one inline
        let answered = Box::pin(dlock_core::backend::retry_within(
            self.opts.timeout,
            what,
            || call(self.client.clone()),
            is_transient,
            |e| from_etcd(what, e),
        ))
        .await?;
        Ok((answered.value, answered.first_attempt))
    }
}
