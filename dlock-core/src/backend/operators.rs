//! What operators do to a claim backend's lock from outside the process that took it
//! — revoke or break its holder, take its lease up from a ticket — written once over
//! [`Backend`]: the claim family releases and renews by name, owner id and token alone.

use tokio::time::Instant;

use super::Backend;
use crate::{Lease, LockError, LockInfo, LockName, Ticket};

/// [`crate::DistributedLock::break_holder`] for a backend whose release is checked by name,
/// owner id and token alone (the claim family, memory): the holder `inspect` finds,
/// released as its own release would release it — again if the holder changed in
/// between.
///
/// # Errors
/// The backend's error; [`LockError::Unavailable`] when the holder changed five times
/// in a row.
///
/// # Cancel safety
/// As [`crate::DistributedLock::break_holder`].
pub async fn break_claimed<B: Backend + ?Sized>(
    backend: &B,
    name: &LockName,
) -> Result<Option<LockInfo>, LockError> {
    for _ in 0..5 {
        let Some(holder) = backend.inspect(name).await? else {
            return Ok(None);
        };
        let ttl = holder.remaining.max(crate::MIN_TTL);
        let as_held = Lease::new(
            name.clone(),
            holder.owner.clone(),
            holder.token,
            ttl,
            Instant::now(),
        );
        if backend.release(&as_held).await? {
            tracing::warn!(lock = %name, owner = %holder.owner, token = %holder.token, backend = backend.backend_name(), "holder broken");
            return Ok(Some(holder));
        }
    }
    Err(LockError::transient(format!(
        "the holder of {name} kept changing while breaking it; try again"
    )))
}

/// [`crate::DistributedLock::revoke_holder`] for a backend whose renewals are checked
/// by name, owner id and token alone (the claim family): the holder `inspect` finds is
/// handed to `revoke`, which puts [`crate::OwnerId::revoked`] in place of its owner id
/// on the server if that holder still holds, keeping its expiry, and says whether it
/// did — again if the holder changed in between. A holder revoked already is
/// returned as it is.
///
/// # Errors
/// The backend's error; [`LockError::Unavailable`] when the holder changed five times
/// in a row.
///
/// # Cancel safety
/// As [`crate::DistributedLock::revoke_holder`].
pub async fn revoke_claimed<B, F, Fut>(
    backend: &B,
    name: &LockName,
    revoke: F,
) -> Result<Option<LockInfo>, LockError>
where
    B: Backend + ?Sized,
    F: Fn(LockInfo) -> Fut,
    Fut: std::future::Future<Output = Result<bool, LockError>>,
{
    for _ in 0..5 {
        let Some(holder) = backend.inspect(name).await? else {
            return Ok(None);
        };
        if holder.owner.is_revoked() || revoke(holder.clone()).await? {
            tracing::warn!(lock = %name, owner = %holder.owner, token = %holder.token, backend = backend.backend_name(), "holder revoked");
            return Ok(Some(holder));
        }
    }
    Err(LockError::transient(format!(
        "the holder of {name} kept changing while revoking it; try again"
    )))
}

/// [`crate::DistributedLock::resume`] for a backend that renews and releases by name, owner
/// id and token alone (the claim family): the ticket's lease, if `inspect` finds it
/// still held by the ticket's owner with its token, valid for what the server says is
/// left of it.
///
/// # Errors
/// [`LockError::LeaseLost`] when it is not held so; `InvalidArgument` for a ticket of
/// another backend; the backend's error from `inspect`.
///
/// # Cancel safety
/// A read: dropping it changes nothing.
pub async fn resume_held<B: Backend + ?Sized>(
    backend: &B,
    ticket: &Ticket,
) -> Result<Lease, LockError> {
    if ticket.backend() != backend.backend_name() {
        return Err(ticket.foreign(backend.backend_name()));
    }
    let sent = Instant::now();
    match backend.inspect(ticket.name()).await? {
        Some(h) if h.owner == *ticket.owner() && h.token == ticket.token() => {
            // a lease granted as if sent when it would end as the server says: its
            // deadline is what is left, measured from before we asked
            let granted = sent
                .checked_sub(ticket.ttl().saturating_sub(h.remaining))
                .unwrap_or(sent);
            Ok(Lease::new(
                ticket.name().clone(),
                ticket.owner().clone(),
                ticket.token(),
                ticket.ttl(),
                granted,
            ))
        }
        _ => Err(LockError::lease_lost(ticket.name())),
    }
}

/// Refuses, as [`crate::DistributedLock::proclaim`] says, what no backend proclaims
/// for: a semaphore's permit or a side of a read-write lock (only a mutex's holder is
/// read back by `inspect`), a fallback lease (it holds nothing on the server), and a
/// lease past its `valid_until` (this client no longer counts on it).
///
/// # Errors
/// [`LockError::Unsupported`] for the first two, [`LockError::LeaseLost`] for the last.
pub fn proclaimable(backend: &'static str, lease: &Lease) -> Result<(), LockError> {
    if lease.fallback().is_some() {
        return Err(LockError::unsupported_feature(
            backend,
            "proclaiming a value for a fallback lease (it holds no lock on the server)",
        ));
    }
    if lease.access() != crate::Access::Exclusive {
        return Err(LockError::unsupported_feature(
            backend,
            "proclaiming a value for a shared lock's lease",
        ));
    }
    if !lease.is_valid() {
        return Err(LockError::lease_lost(lease.name()));
    }
    Ok(())
}
