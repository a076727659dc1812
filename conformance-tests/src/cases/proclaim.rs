//! A leader's proclaimed value (`Leadership::proclaim`, `DistributedLock::proclaim`):
//! stored with the lease on every backend.

use std::time::Duration;

use dlock_core::{Election, HolderValue, LockError};

use super::{LONG_TTL, unique};
use crate::Harness;

/// A leader proclaims a new value: readers and a running observer see it with the
/// same epoch; it is the holder's alone — the next leader shows its own value, and a
/// lease that is gone cannot proclaim; a shared lock's lease cannot proclaim at all.
pub async fn proclaimed_values_are_seen_without_a_new_epoch(h: &impl Harness) {
    let (a, b) = (h.client().await, h.client().await);
    let name = unique("proclaim");
    let leading = Election::new(a.lock(), name.as_str())
        .expect("election")
        .with_ttl(LONG_TTL);
    let watching = Election::new(b.lock(), name.as_str())
        .expect("election")
        .with_ttl(LONG_TTL);
    let mut leadership = leading.campaign("10.0.0.1:80").await.expect("leads");
    let epoch = leadership.epoch();
    let mut changes = watching.observe();
    let first = changes.next().await.expect("observe").expect("a leader");
    assert_eq!(
        (first.value.as_deref(), first.epoch),
        (Some("10.0.0.1:80"), epoch)
    );

    leadership.proclaim("10.0.0.2:80").await.expect("proclaims");
    assert_eq!(leadership.value(), "10.0.0.2:80");
    let read = watching.leader().await.expect("read").expect("a leader");
    assert_eq!(
        (read.value.as_deref(), read.epoch),
        (Some("10.0.0.2:80"), epoch)
    );
    let seen = tokio::time::timeout(Duration::from_secs(10), changes.next())
        .await
        .expect("the observer sees the proclaimed value")
        .expect("observe")
        .expect("a leader");
    assert_eq!(
        (seen.value.as_deref(), seen.epoch),
        (Some("10.0.0.2:80"), epoch)
    );
    assert!(matches!(
        leadership.proclaim("bad\nvalue").await,
        Err(LockError::InvalidArgument(_))
    ));
    // again: the stored value is replaced, not added to
    leadership
        .proclaim("10.0.0.4:80")
        .await
        .expect("proclaims again");
    let read = watching.leader().await.expect("read").expect("a leader");
    assert_eq!(
        (read.value.as_deref(), read.epoch),
        (Some("10.0.0.4:80"), epoch)
    );
    // and in the list of held locks, where the backend lists them
    match b.list(name.as_str()).await {
        Ok(held) => {
            let listed = held.iter().find(|h| h.name == name).expect("listed");
            assert_eq!(
                listed.holder.value().as_ref().map(HolderValue::as_str),
                Some("10.0.0.4:80")
            );
        }
        Err(LockError::Unsupported { .. }) => {}
        Err(e) => panic!("list: {e}"),
    }

    // the value is this leadership's: gone with it, never the next leader's
    let lease = leadership.guard().lease();
    assert!(leadership.resign().await.expect("resign"));
    let value = HolderValue::new("10.0.0.3:80").expect("value");
    assert!(matches!(
        a.proclaim(&lease, &value).await,
        Err(LockError::LeaseLost { .. })
    ));
    let next = watching.campaign("10.0.0.9:80").await.expect("leads next");
    assert!(next.epoch() > epoch);
    let read = leading.leader().await.expect("read").expect("a leader");
    assert_eq!(
        (read.value.as_deref(), read.epoch),
        (Some("10.0.0.9:80"), next.epoch())
    );
    assert!(next.resign().await.expect("resign"));

    if a.capabilities().shared {
        let side = unique("proclaim_shared");
        let read = a
            .try_read(&side, LONG_TTL)
            .await
            .expect("try_read")
            .expect("free");
        assert!(matches!(
            a.proclaim(&read, &value).await,
            Err(LockError::Unsupported { .. })
        ));
        assert!(a.release(&read).await.expect("release"));
    }
}
