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

/// What [`retry_within`] answered with: the value, and whether the first attempt gave
/// it (no earlier attempt can still land on the server).
#[derive(Debug)]
#[non_exhaustive]
pub struct Answered<T> {
    /// The attempt's value.
    pub value: T,
    /// Whether it came from the first attempt.
    pub first_attempt: bool,
}

/// Runs `attempt` until it answers, fails for good, or `limit` has passed: an error
/// `retryable` accepts (a dead endpoint, a connection a restart broke) is followed by a
/// pause that doubles from 5 ms to 200 ms and another attempt. `into_error` says what an
/// error of the client library is as a [`LockError`].
///
/// ```
/// use std::time::Duration;
/// use dlock_core::{LockError, backend::retry_within};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let mut tries = 0;
/// let answered = retry_within(
///     Duration::from_secs(1),
///     "read on h:1",
///     || {
///         tries += 1;
///         let now = tries;
///         async move { if now < 3 { Err("connection reset") } else { Ok(now) } }
///     },
///     |e: &&str| e.contains("reset"),
///     |e| LockError::transient(e),
/// )
/// .await?;
/// assert_eq!((answered.value, answered.first_attempt), (3, false));
/// # Ok(()) }
/// ```
///
/// # Errors
/// An error `retryable` refuses, at once; at the limit, the last retried error (what the
/// server said last), or a transient "`what`: no answer within `limit`".
///
/// # Cancel safety
/// As the attempts it makes: dropping it drops the one in flight.
pub async fn retry_within<T, E, F, Fut>(
    limit: Duration,
    what: &str,
    mut attempt: F,
    retryable: impl Fn(&E) -> bool,
    into_error: impl Fn(E) -> LockError,
) -> Result<Answered<T>, LockError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    let mut pause = Duration::from_millis(5);
    let mut first_attempt = true;
    let mut last = None;
    loop {
        match tokio::time::timeout_at(deadline, attempt()).await {
            Ok(Ok(value)) => {
                return Ok(Answered {
                    value,
                    first_attempt,
                });
            }
            Ok(Err(e)) if retryable(&e) => {
                let e = into_error(e);
                tracing::debug!(error = %e, "{what}: retrying");
                if tokio::time::Instant::now() + pause >= deadline {
                    return Err(e);
                }
                last = Some(e);
                first_attempt = false;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            Ok(Err(e)) => return Err(into_error(e)),
            Err(_) => {
                return Err(last.unwrap_or_else(|| {
                    LockError::transient(format!("{what}: no answer within {limit:?}"))
                }));
            }
        }
    }
}
