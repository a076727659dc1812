//! Steps the cases and the adapters' own tests share: take a free lock, give it back.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, Lease, LockGuard, LockName};

/// Asserts rule 5: a lease is handed out only while it is still valid.
///
/// # Panics
/// When `lease` is past its `valid_until`.
pub fn assert_fresh(lease: &Lease) {
    assert!(
        lease.is_valid(),
        "a lease was returned after its valid_until: {lease:?}"
    );
}

/// Takes a free lock or fails the test: one attempt (as `try_acquire`) must answer a
/// lease, and a fresh one.
///
/// # Panics
/// When the call fails, the lock is held, or the lease is already past its
/// `valid_until`.
pub async fn take(client: &dyn DistributedLock, name: &LockName, ttl: Duration) -> Lease {
    take_as(client, name, ttl, dlock_core::Access::Exclusive).await
}

/// Takes a free lock, as [`take`], with `access` (a permit, a side of a read-write
/// lock).
///
/// # Panics
/// As [`take`].
pub async fn take_as(
    client: &dyn DistributedLock,
    name: &LockName,
    ttl: Duration,
    access: dlock_core::Access,
) -> Lease {
    let request = dlock_core::Acquisition::new(name, ttl).with_access(access);
    let lease = client
        .acquire_with(&request)
        .await
        .expect("an attempt must not fail")
        .unwrap_or_else(|| panic!("{name} should be free for {access:?}"));
    assert_fresh(&lease);
    lease
}

/// Takes a free lock and gives it back: a warm-up, or proof that the name is free.
///
/// # Panics
/// As [`take`], and when the release fails or finds the lease gone.
pub async fn take_and_release(client: &dyn DistributedLock, name: &LockName, ttl: Duration) {
    let lease = take(client, name, ttl).await;
    assert!(client.release(&lease).await.expect("release"));
}

/// A name no other test run uses: `prefix/` and 16 random hex digits.
///
/// # Panics
/// When `prefix` makes an invalid name.
#[must_use]
pub fn unique_name(prefix: &str) -> LockName {
    LockName::new(&format!("{prefix}/{:016x}", dlock_core::random_u64())).expect("a valid name")
}

/// Takes a free lock, as [`take`], and keeps it renewed in a [`LockGuard`].
///
/// # Panics
/// As [`take`].
pub async fn guarded(lock: &Arc<dyn DistributedLock>, name: &LockName, ttl: Duration) -> LockGuard {
    LockGuard::new(Arc::clone(lock), take(&**lock, name, ttl).await)
}

/// Tries `name` until a lease comes, through refusals and errors (a server coming
/// back, a failover), for up to `within`.
///
/// # Panics
/// When no lease came within `within`, with `why` and the last answer.
pub async fn take_once_back(
    lock: &dyn DistributedLock,
    name: &LockName,
    ttl: Duration,
    within: Duration,
    why: &str,
) -> Lease {
    let end = tokio::time::Instant::now() + within;
    loop {
        match lock.try_acquire(name, ttl).await {
            Ok(Some(lease)) => return lease,
            other => assert!(
                tokio::time::Instant::now() < end,
                "{why} within {within:?}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Who holds `name`, as `lock` reads it.
///
/// # Panics
/// When the read fails or finds `name` free.
pub async fn holder_of(lock: &dyn DistributedLock, name: &LockName) -> dlock_core::LockInfo {
    lock.inspect(name)
        .await
        .expect("inspect must not fail")
        .unwrap_or_else(|| panic!("{name} should be held"))
}

/// Asserts that `next` was granted after `before` (rule 3: its token is higher).
///
/// # Panics
/// When `next`'s token is not above `before`'s, with `why`.
pub fn assert_later(next: &Lease, before: &Lease, why: &str) {
    assert!(
        next.token() > before.token(),
        "{} after {}: {why}",
        next.token(),
        before.token()
    );
}

/// `lock.acquire(name, ttl, wait)` running on a task of its own: a waiter the test can
/// race, cancel or join.
pub fn acquiring<L: DistributedLock + ?Sized + 'static>(
    lock: &Arc<L>,
    name: &LockName,
    ttl: Duration,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<Lease, dlock_core::LockError>> {
    let (lock, name) = (Arc::clone(lock), name.clone());
    tokio::spawn(async move { lock.acquire(&name, ttl, wait).await })
}

/// Like [`acquiring`], for a waiter that must get the lock: its lease and when it got it.
///
/// # Panics
/// (On the task, seen when joined) when the acquire fails.
pub fn acquiring_timed<L: DistributedLock + ?Sized + 'static>(
    lock: &Arc<L>,
    name: &LockName,
    ttl: Duration,
    wait: Duration,
) -> tokio::task::JoinHandle<(tokio::time::Instant, Lease)> {
    let (lock, name) = (Arc::clone(lock), name.clone());
    tokio::spawn(async move {
        let lease = lock.acquire(&name, ttl, wait).await.expect("acquire");
        (tokio::time::Instant::now(), lease)
    })
}

/// Asserts that `e` shows `secret` neither in its message nor in its `Debug` form.
fn hides(e: &dlock_core::LockError, secret: &str) {
    if !secret.is_empty() {
        assert!(
            !e.to_string().contains(secret) && !format!("{e:?}").contains(secret),
            "the error shows {secret:?}: {e:?}"
        );
    }
}

/// Asserts that `result` (a connect or a call given bad input) is a
/// [`dlock_core::LockError::Config`] error that does not show `secret` (a password in
/// the URL; `""` for none).
///
/// # Panics
/// When it is anything else.
pub fn assert_config_error<L>(result: Result<L, dlock_core::LockError>, secret: &str) {
    match result {
        Err(e @ dlock_core::LockError::Config(_)) => hides(&e, secret),
        Err(e) => panic!("a Config error, not {e:?}"),
        Ok(_) => panic!("a Config error, not success"),
    }
}

/// Asserts that `connecting` (to a port nobody listens on) gives up with
/// [`dlock_core::LockError::Unavailable`] within `within`, not showing `secret`.
///
/// # Panics
/// When it succeeds, fails otherwise, takes longer, or shows `secret`.
pub async fn assert_unreachable<L>(
    connecting: impl std::future::Future<Output = Result<L, dlock_core::LockError>>,
    secret: &str,
    within: Duration,
) {
    let started = std::time::Instant::now();
    match connecting.await {
        Err(e @ dlock_core::LockError::Unavailable { .. }) => hides(&e, secret),
        Err(e) => panic!("Unavailable, not {e:?}"),
        Ok(_) => panic!("Unavailable, not a connection"),
    }
    let took = started.elapsed();
    assert!(
        took < within,
        "gave up after {took:?}, not within {within:?}"
    );
}

/// Waits for every task to finish within `within` (together), each without a panic.
///
/// # Panics
/// When they take longer (`late` says what that means) or one of them panicked.
pub async fn join_within(tasks: Vec<tokio::task::JoinHandle<()>>, within: Duration, late: &str) {
    let all = async {
        for t in tasks {
            t.await.expect("a task panicked");
        }
    };
    tokio::time::timeout(within, all).await.expect(late);
}
