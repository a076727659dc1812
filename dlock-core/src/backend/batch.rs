//! Helpers for backends that send requests arriving together as one request (see
//! [`crate::Capabilities::batched_renewals`]): gathering a batch from a queue, and
//! handing one failure to every caller in it.

use tokio::sync::mpsc::UnboundedReceiver;

use crate::LockError;

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
/// assert_eq!(dlock_core::gather_batch(first, &mut rx, 10).await, vec![1, 2, 3]);
/// # }
/// ```
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
            Self::Unavailable { message, .. } => Self::Unavailable {
                message: message.clone(),
                source: None,
            },
            Self::Backend { message, .. } => Self::Backend {
                message: message.clone(),
                source: None,
            },
            Self::Config(m) => Self::Config(m.clone()),
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

    #[test]
    fn copies_keep_the_variant_and_message() {
        let e = LockError::unavailable("renew on x: reset", std::io::Error::other("reset"));
        let c = e.for_another_caller();
        assert!(matches!(c, LockError::Unavailable { source: None, .. }));
        assert_eq!(c.to_string(), e.to_string());
    }
}
