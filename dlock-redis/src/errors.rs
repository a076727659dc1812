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
        // a redirect (MOVED, ASK) the cluster client stopped following, to a master
        // that is gone or a slot map still settling: refused, not run, and a failover
        // in progress
        || e.is_cluster_error()
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

#[cfg(test)]
mod tests {
    use super::*;
    use redis::{ErrorKind, RedisError, ServerErrorKind};

    fn server(kind: ServerErrorKind, detail: &str) -> RedisError {
        RedisError::from((ErrorKind::Server(kind), "server", detail.to_owned()))
    }

    /// A cluster client that stops following a redirect mid-failover (its target gone)
    /// hands back the MOVED: the command was refused, so a waiter must retry, not fail.
    #[test]
    fn redirects_given_up_on_are_an_outage() {
        for kind in [
            ServerErrorKind::Moved,
            ServerErrorKind::Ask,
            ServerErrorKind::TryAgain,
            ServerErrorKind::ClusterDown,
        ] {
            let e = from_redis("acquire", server(kind, "14874 127.0.0.1:27054"));
            assert!(matches!(e, LockError::Unavailable { .. }), "{e:?}");
        }
        let e = from_redis("acquire", server(ServerErrorKind::NoScript, "x"));
        assert!(matches!(e, LockError::Backend { .. }), "{e:?}");
    }
}
