//! Redis errors as dlock's: what a retry may fix, and what it cannot.

use dlock_core::LockError;

/// Connection trouble and a failover in progress are `Unavailable` (outcome unknown), a
/// server error `Backend`.
pub(crate) fn from_redis(what: &str, e: redis::RedisError) -> LockError {
    let message = format!("{what}: {e}");
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
    {
        return LockError::Config(format!(
            "{message} (check the user and password in the URL)"
        ));
    }
    if e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        // a server that is (now) a replica, or a master cut off from its replicas
        // (`min-replicas-to-write`): a failover in progress, which a retry on the next
        // master may get past; a cluster between slot maps
        || matches!(
            e.code(),
            Some("READONLY" | "MASTERDOWN" | "LOADING" | "NOREPLICAS" | "CLUSTERDOWN" | "TRYAGAIN")
        )
    {
        LockError::unavailable(message, e)
    } else {
        LockError::backend(message, e)
    }
}
