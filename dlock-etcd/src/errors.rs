//! etcd-client errors as `LockError`s.

use dlock_core::LockError;
use etcd_client::Error;

// gRPC status codes (numbers fixed by the gRPC spec)
const CANCELLED: i32 = 1;
const UNKNOWN: i32 = 2;
const DEADLINE_EXCEEDED: i32 = 4;
const NOT_FOUND: i32 = 5;
const ABORTED: i32 = 10;
const UNAVAILABLE: i32 = 14;

/// Transport trouble and "try elsewhere" answers are `Unavailable` (the RPC may be
/// retried on another endpoint); everything else the server said is `Backend`.
pub(crate) fn from_etcd(what: &str, e: Error) -> LockError {
    let message = format!("{what}: {e}");
    if is_transient(&e) {
        LockError::unavailable(message, e)
    } else {
        LockError::backend(message, e)
    }
}

pub(crate) fn is_transient(e: &Error) -> bool {
    match e {
        Error::TransportError(_) | Error::IoError(_) => true,
        Error::GRpcStatus(s) => matches!(
            i32::from(s.code()),
            UNAVAILABLE | DEADLINE_EXCEEDED | UNKNOWN | ABORTED | CANCELLED
        ),
        Error::LeaseKeepAliveError(m) | Error::WatchError(m) => !m.contains("not found"),
        _ => false,
    }
}

/// etcd's answer when a lease is gone.
pub(crate) fn is_lease_not_found(e: &Error) -> bool {
    match e {
        Error::GRpcStatus(s) => {
            i32::from(s.code()) == NOT_FOUND || s.message().contains("lease not found")
        }
        Error::LeaseKeepAliveError(m) => m.contains("not found"),
        _ => false,
    }
}
