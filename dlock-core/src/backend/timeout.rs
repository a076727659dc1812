//! One time limit for every request an adapter sends.

use std::future::Future;
use std::time::Duration;

use crate::LockError;

/// Runs `request` for at most `limit`; when it does not finish, a transient
/// [`LockError::Unavailable`] "`what`: no answer within `limit`" (the request may still
/// be applied by the server: a caller that retries must be ready to find it done).
///
/// ```
/// use std::time::Duration;
/// use dlock_core::{LockError, backend::within};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let slow = async {
///     tokio::time::sleep(Duration::from_secs(60)).await;
///     Ok::<_, LockError>(())
/// };
/// let e = within(Duration::from_millis(5), "acquire on h:1", slow).await.unwrap_err();
/// assert!(e.is_transient());
/// # }
/// ```
///
/// # Errors
/// `request`'s own error, or `Unavailable` at the limit.
///
/// # Cancel safety
/// As the operation it bounds: dropping it drops that operation.
pub async fn within<T>(
    limit: Duration,
    what: &str,
    request: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    tokio::time::timeout(limit, request)
        .await
        .unwrap_or_else(|_| {
            Err(LockError::transient(format!(
                "{what}: no answer within {limit:?}"
            )))
        })
}
