//! Requests that arrive together sent as one (see
//! [`crate::Capabilities::batched_renewals`]): a [`Batcher`] queue, the gathering of a
//! batch, and one failure handed to every caller in it.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::sync::oneshot;

use crate::LockError;

type Reply<A> = oneshot::Sender<Result<A, LockError>>;

/// A queue whose requests are sent in batches by one function: every request that
/// reaches it while the previous batch is being taken off is sent with it (up to a
/// maximum), and the next batch goes out without waiting for the previous answer
/// (pipelined). Guards renew on a shared grid, so the renewals of every lock with one
/// TTL come due together and cost one request per tick.
///
/// ```
/// use dlock_core::backend::Batcher;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_core::LockError> {
/// // one "request" that doubles every number in the batch
/// let doubler = Batcher::start("double", 64, |batch: Vec<u32>| async move {
///     Ok(batch.into_iter().map(|n| Ok(n * 2)).collect())
/// });
/// let (a, b) = (doubler.submit(1)?, doubler.submit(20)?);
/// assert_eq!((a.answer().await?, b.answer().await?), (2, 40));
/// # Ok(()) }
/// ```
pub struct Batcher<R, A> {
    queue: mpsc::UnboundedSender<(R, Reply<A>)>,
    what: &'static str,
}

impl<R, A> std::fmt::Debug for Batcher<R, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").field("what", &self.what).finish()
    }
}

impl<R: Send + 'static, A: Send + 'static> Batcher<R, A> {
    /// Starts the batching task (on the current tokio runtime; it ends when the
    /// `Batcher` is dropped). `send` answers a batch with one answer per request, in
    /// order, or one error for all; `what` names the operation in errors.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start<F, Fut>(what: &'static str, max: usize, send: F) -> Self
    where
        F: Fn(Vec<R>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<Result<A, LockError>>, LockError>> + Send + 'static,
    {
        let (queue, mut rx) = mpsc::unbounded_channel::<(R, Reply<A>)>();
        let send = Arc::new(send);
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let batch = gather_batch(first, &mut rx, max.max(1)).await;
                // Not awaited here, so the next batch is pipelined behind this one.
                tokio::spawn(deliver(what, batch, Arc::clone(&send)));
            }
        });
        Self { queue, what }
    }

    /// Queues `request`. Queuing is synchronous, so a caller sending to several
    /// batchers (one per node) queues on all of them before waiting for any.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when the batching task has stopped.
    pub fn submit(&self, request: R) -> Result<Pending<A>, LockError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((request, reply))
            .map_err(|_| stopped(self.what))?;
        Ok(Pending {
            answer,
            what: self.what,
        })
    }
}

/// The answer to one queued request.
#[derive(Debug)]
pub struct Pending<A> {
    answer: oneshot::Receiver<Result<A, LockError>>,
    what: &'static str,
}

impl<A> Pending<A> {
    /// Waits for the answer.
    ///
    /// # Errors
    /// The batch's error, or [`LockError::Unavailable`] when the task stopped.
    ///
    /// # Cancel safety
    /// Dropping it forgets the answer; the request may still be sent.
    pub async fn answer(self) -> Result<A, LockError> {
        let what = self.what;
        self.answer.await.map_err(|_| stopped(what))?
    }
}

fn stopped(what: &str) -> LockError {
    LockError::transient(format!("{what}: the batching queue has stopped"))
}

async fn deliver<R, A, F, Fut>(what: &'static str, batch: Vec<(R, Reply<A>)>, send: Arc<F>)
where
    F: Fn(Vec<R>) -> Fut,
    Fut: Future<Output = Result<Vec<Result<A, LockError>>, LockError>>,
{
    let (requests, replies): (Vec<R>, Vec<Reply<A>>) = batch.into_iter().unzip();
    let asked = replies.len();
    let answers = send(requests).await.and_then(|answers| {
        if answers.len() == asked {
            Ok(answers)
        } else {
            Err(LockError::backend_msg(format!(
                "{what}: {} answers for {asked} requests",
                answers.len()
            )))
        }
    });
    match answers {
        Ok(answers) => {
            for (reply, a) in replies.into_iter().zip(answers) {
                let _ = reply.send(a);
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.for_another_caller()));
            }
        }
    }
}

/// `first` and whatever else reaches `queue` while the runtime runs the other ready
/// tasks — such as every renewal woken by one timer tick — up to `max` items. It keeps
/// yielding while more keep arriving, and never waits for more than that.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// for i in 1..=3 {
///     tx.send(i).unwrap();
/// }
/// let first = rx.recv().await.unwrap();
/// assert_eq!(dlock_core::backend::gather_batch(first, &mut rx, 10).await, vec![1, 2, 3]);
/// # }
/// ```
///
/// # Cancel safety
/// Dropping it loses the items it took from the queue: call it where the batch is sent,
/// not in a `select!` branch that may lose.
pub async fn gather_batch<T>(first: T, queue: &mut UnboundedReceiver<T>, max: usize) -> Vec<T> {
    let mut batch = vec![first];
    loop {
        tokio::task::yield_now().await;
        let before = batch.len();
        while batch.len() < max {
            match queue.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        if batch.len() == before || batch.len() >= max {
            return batch;
        }
    }
}

impl LockError {
    /// The same error for another caller that shared the failed request: same variant
    /// and message, without the source (which cannot be cloned).
    #[must_use]
    pub fn for_another_caller(&self) -> Self {
        match self {
            Self::InvalidName { name, reason } => Self::InvalidName {
                name: name.clone(),
                reason,
            },
            Self::InvalidArgument(m) => Self::InvalidArgument(m.clone()),
            Self::Timeout { name, waited } => Self::Timeout {
                name: name.clone(),
                waited: *waited,
            },
            Self::LeaseLost { name } => Self::LeaseLost { name: name.clone() },
            Self::StaleToken {
                resource,
                seen,
                offered,
            } => Self::StaleToken {
                resource: resource.clone(),
                seen: *seen,
                offered: *offered,
            },
            Self::HoldExpired { name, max_hold } => Self::HoldExpired {
                name: name.clone(),
                max_hold: *max_hold,
            },
            Self::Unavailable { message, .. } => Self::Unavailable {
                message: message.clone(),
                source: None,
            },
            Self::Backend { message, .. } => Self::Backend {
                message: message.clone(),
                source: None,
            },
            Self::Config(m) => Self::Config(m.clone()),
            Self::Unsupported { backend, what } => Self::Unsupported {
                backend,
                what: what.clone(),
            },
            Self::PermitsMismatch {
                name,
                in_use,
                asked,
            } => Self::PermitsMismatch {
                name: name.clone(),
                in_use: *in_use,
                asked: *asked,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_stops_at_max_and_keeps_the_rest_queued() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        let first = rx.recv().await.unwrap();
        assert_eq!(gather_batch(first, &mut rx, 3).await, vec![0, 1, 2]);
        let first = rx.recv().await.unwrap();
        assert_eq!(gather_batch(first, &mut rx, 3).await, vec![3, 4]);
    }

    #[tokio::test]
    async fn a_short_answer_fails_the_whole_batch() {
        let b = Batcher::start("short", 8, |batch: Vec<u8>| async move {
            Ok(batch.into_iter().skip(1).map(Ok).collect())
        });
        let (x, y) = (b.submit(1).unwrap(), b.submit(2).unwrap());
        for p in [x, y] {
            let e = p.answer().await.unwrap_err();
            assert!(matches!(e, LockError::Backend { .. }), "{e}");
        }
    }

    #[test]
    fn copies_keep_the_variant_and_message() {
        let e = LockError::unavailable("renew on x: reset", std::io::Error::other("reset"));
        let c = e.for_another_caller();
        assert!(matches!(c, LockError::Unavailable { source: None, .. }));
        assert_eq!(c.to_string(), e.to_string());
    }
}
