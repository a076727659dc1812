//! What an operator sees and does: who holds a lock (the holder's process), revoking
//! a holder that must stop, and breaking one that is stuck.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{Access, Acquisition, DistributedLock, LockError, Locker, ProcessHolder};

use super::{LONG_TTL, clients_and_name};
use crate::Harness;

/// A holder that says which process it is — through a [`Locker`] for the mutex, through
/// [`Acquisition`] for a permit and a reader — is seen as that process by every other
/// client: `inspect`, `holders`, and `list` where the backend lists.
pub async fn process_holder_is_readable(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "process_holder_is_readable").await;
    let me = ProcessHolder::this_process("nightly-report");
    let value = me.to_value().expect("fits");
    let locker = Locker::new(a.lock())
        .with_ttl(LONG_TTL)
        .with_value(value.clone());
    let guard = locker.lock(name.as_str()).await.expect("lock");
    let seen = b.inspect(&name).await.expect("inspect").expect("held");
    let process = ProcessHolder::of(&seen.owner).expect("the holder said who it is");
    assert_eq!(
        (process.host.as_str(), process.pid, process.command.as_str()),
        (me.host.as_str(), me.pid, "nightly-report")
    );
    match b.list(name.as_str()).await {
        Ok(held) => {
            let listed = held.iter().find(|h| h.name == name).expect("listed");
            assert_eq!(ProcessHolder::of(&listed.holder.owner), Some(process));
        }
        Err(LockError::Unsupported { .. }) => {}
        Err(e) => panic!("list: {e}"),
    }
    guard.release().await.expect("release");
    if !b.capabilities().shared {
        return;
    }
    for access in [Access::Permit(2), Access::Read] {
        let request = Acquisition::new(&name, LONG_TTL)
            .with_access(access)
            .with_value(&value);
        let lease = a
            .acquire_with(&request)
            .await
            .expect("acquire_with")
            .expect("free");
        let holders = b.holders(&name, access).await.expect("holders");
        assert_eq!(holders.len(), 1, "{access}");
        let process = ProcessHolder::of(&holders[0].owner).expect("the holder said who it is");
        assert_eq!(process.command, "nightly-report", "{access}");
        assert!(a.release(&lease).await.expect("release"));
    }
}

/// An operator breaks a holder that does not let go: the waiter behind it gets the
/// lock at once with a higher token, the broken holder's guard turns lost (its next
/// renewal is refused), and breaking a free name breaks nobody.
pub async fn break_holder_hands_the_lock_on(h: &impl Harness) {
    let ([a, b, operator], name) = clients_and_name(h, "break_holder").await;
    let ttl = Duration::from_secs(3);
    let stuck = Locker::new(a.lock())
        .with_ttl(ttl)
        .lock(name.as_str())
        .await
        .expect("lock");
    let broken_token = stuck.token();
    let waiter = {
        let b: Arc<dyn DistributedLock> = b.lock();
        let name = name.clone();
        tokio::spawn(async move { b.acquire(&name, LONG_TTL, Duration::from_secs(20)).await })
    };
    // the waiter is queued (or polling) behind the stuck holder
    tokio::time::sleep(Duration::from_millis(200)).await;
    let broken = operator
        .break_holder(&name)
        .await
        .expect("break_holder")
        .expect("someone held it");
    assert_eq!(
        (&broken.owner, broken.token),
        (stuck.lease().owner(), broken_token)
    );
    let next = waiter
        .await
        .expect("task")
        .expect("the waiter gets the lock");
    assert!(next.token() > broken_token, "the next token is higher");
    // the broken holder learns it at its next renewal (a third of the TTL), or when
    // its lease runs out at the latest
    tokio::time::timeout(ttl * 2, stuck.lost())
        .await
        .expect("the broken holder's guard turns lost");
    assert!(!stuck.is_held());
    assert!(b.release(&next).await.expect("release"));
    assert!(
        operator
            .break_holder(&name)
            .await
            .expect("break_holder")
            .is_none(),
        "a free name has nobody to break"
    );
}

/// An operator revokes a holder that must stop: its guard turns lost (its next renewal
/// is refused), and the waiter behind it is not let in while that guard still held —
/// only once the revoked lease has run out or its holder let go (its release, which
/// answers that the lease was no longer its own, ends it at once on etcd and
/// ZooKeeper), with a higher token. Revoking twice changes nothing; revoking a free
/// name revokes nobody.
pub async fn revoke_holder_lets_nobody_in_while_it_holds(h: &impl Harness) {
    let ([a, b, operator], name) = clients_and_name(h, "revoke_holder").await;
    let ttl = Duration::from_secs(3);
    let revoked = Locker::new(a.lock())
        .with_ttl(ttl)
        .lock(name.as_str())
        .await
        .expect("lock");
    let revoked_token = revoked.token();
    // cleared once the revoked guard has reported the loss
    let believed_held = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let waiter = {
        let (b, name, held) = (b.lock(), name.clone(), Arc::clone(&believed_held));
        tokio::spawn(async move {
            let next = b.acquire(&name, LONG_TTL, Duration::from_secs(30)).await;
            (next, held.load(std::sync::atomic::Ordering::SeqCst))
        })
    };
    // the waiter is queued (or polling) behind the holder
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen = operator
        .revoke_holder(&name)
        .await
        .expect("revoke_holder")
        .expect("someone held it");
    assert_eq!(
        (&seen.owner, seen.token),
        (revoked.lease().owner(), revoked_token)
    );
    // a second revoke (an operator's retry) finds it revoked, and changes nothing
    let twice = operator
        .revoke_holder(&name)
        .await
        .expect("revoke_holder again")
        .expect("still taken");
    assert!(
        twice.owner.is_revoked() && twice.token == revoked_token,
        "{twice:?}"
    );
    // the revoked holder learns it at its next renewal (a third of the TTL), or when
    // its lease runs out at the latest
    tokio::time::timeout(ttl * 2, revoked.lost())
        .await
        .expect("the revoked holder's guard turns lost");
    assert!(!revoked.is_held());
    believed_held.store(false, std::sync::atomic::Ordering::SeqCst);
    let again = operator.inspect(&name).await.expect("inspect");
    assert!(
        again.as_ref().is_none_or(|h| h.token == revoked_token),
        "nobody else holds it yet: {again:?}"
    );
    // its holder lets go (on etcd and ZooKeeper that ends the revoked lease at once),
    // and hears that it was no longer its own
    let lease = revoked.lease().clone();
    assert!(
        !a.release(&lease).await.expect("release"),
        "a revoked lease's release says it was no longer held"
    );
    drop(revoked);
    let (next, still_held) = waiter.await.expect("task");
    let next = next.expect("the waiter gets the lock once the revoked lease is over");
    assert!(
        !still_held,
        "the waiter got in while the revoked guard still held"
    );
    assert!(next.token() > revoked_token, "the next token is higher");
    assert!(b.release(&next).await.expect("release"));
    assert!(
        operator
            .revoke_holder(&name)
            .await
            .expect("revoke_holder")
            .is_none(),
        "a free name has nobody to revoke"
    );
}
