//! zookeeper-client errors as `LockError`s.

use dlock_core::LockError;
use zookeeper_client as zk;

/// Connection trouble (including our own session's end) is `Unavailable`; refusals
/// are `Backend`, bad credentials `Config`.
pub(crate) fn from_zk(what: &str, e: zk::Error) -> LockError {
    let message = format!("{what}: {e}");
    match e {
        zk::Error::ConnectionLoss
        | zk::Error::SessionExpired
        | zk::Error::Timeout
        | zk::Error::ClientClosed
        | zk::Error::NoHosts
        | zk::Error::SessionMoved
        | zk::Error::Throttled
        // the session layer reports I/O trouble ("no response from connection") this way
        | zk::Error::Custom(_) => LockError::unavailable(message, e),
        zk::Error::AuthFailed | zk::Error::NoAuth | zk::Error::InvalidAcl => LockError::Config(message),
        _ => LockError::backend(message, e),
    }
}
