//! Read-write locks ([`dlock_core::DistributedRwLock`]): readers share, a writer is
//! alone, and writers do not starve.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use dlock_core::{Access, Lease, LockError, LockName, random_u64};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

use super::workload::on_every_client;
use super::{LONG_TTL, assert_fresh, expiry_bound, shared_case};
use crate::{Harness, TestClient};

async fn read(c: &TestClient, name: &LockName, ttl: Duration) -> Lease {
    let lease = crate::steps::take_as(&**c, name, ttl, Access::Read).await;
    assert_eq!(lease.access(), Access::Read);
    lease
}

/// Readers hold together; a writer is refused while any reader holds and gets the lock
/// once they are gone, with a token above every reader's; readers are refused while it
/// holds.
pub async fn readers_share_writers_exclude(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "readers_share_writers_exclude").await else {
        return;
    };
    let b = h.client().await;
    let r1 = read(&a, &name, LONG_TTL).await;
    let r2 = read(&b, &name, LONG_TTL).await;
    assert!(b.try_write(&name, LONG_TTL).await.expect("try").is_none());
    let holders = a.rw_holders(&name).await.expect("holders");
    assert_eq!(holders.len(), 2);
    assert!(holders.iter().all(|h| h.access == Access::Read));
    assert!(a.release(&r1).await.expect("release"));
    assert!(b.try_write(&name, LONG_TTL).await.expect("try").is_none());
    assert!(b.release(&r2).await.expect("release"));
    let w = b
        .try_write(&name, LONG_TTL)
        .await
        .expect("try")
        .expect("free to write once the readers left");
    assert_eq!(w.access(), Access::Write);
    assert!(w.token() > r1.token() && w.token() > r2.token());
    assert!(a.try_read(&name, LONG_TTL).await.expect("try").is_none());
    assert!(a.try_write(&name, LONG_TTL).await.expect("try").is_none());
    let holders = a.rw_holders(&name).await.expect("holders");
    assert_eq!(holders.len(), 1);
    assert_eq!(
        (holders[0].access, holders[0].token),
        (Access::Write, w.token())
    );
    assert!(b.release(&w).await.expect("release"));
    let r3 = read(&a, &name, LONG_TTL).await;
    assert!(r3.token() > w.token());
    assert!(a.release(&r3).await.expect("release"));
}

/// Many clients read and write one name at random; readers never meet a writer, two
/// writers never meet, and readers do share.
pub async fn rw_workload_never_mixes(h: &impl Harness) {
    let Some((_probe, name)) = shared_case(h, "rw_workload_never_mixes").await else {
        return;
    };
    // readers inside, or -1 for a writer
    let state = Arc::new(AtomicI64::new(0));
    let most_readers = Arc::new(AtomicI64::new(0));
    let gauges = (Arc::clone(&state), Arc::clone(&most_readers));
    on_every_client(h, move |c| {
        let (name, (state, most)) = (name.clone(), gauges.clone());
        async move {
            let wait = Duration::from_secs(120);
            if random_u64().is_multiple_of(4) {
                let lease = c.write(&name, LONG_TTL, wait).await.expect("write");
                assert_fresh(&lease);
                let was = state.swap(-1, Ordering::SeqCst);
                assert_eq!(was, 0, "a writer entered with {was} inside");
                sleep(Duration::from_millis(2)).await;
                assert_eq!(state.swap(0, Ordering::SeqCst), -1);
                assert!(c.release(&lease).await.expect("release"));
            } else {
                let lease = c.read(&name, LONG_TTL, wait).await.expect("read");
                assert_fresh(&lease);
                let was = state.fetch_add(1, Ordering::SeqCst);
                assert!(was >= 0, "a reader entered while a writer held");
                most.fetch_max(was + 1, Ordering::SeqCst);
                sleep(Duration::from_millis(2)).await;
                state.fetch_sub(1, Ordering::SeqCst);
                assert!(c.release(&lease).await.expect("release"));
            }
        }
    })
    .await;
    let most = most_readers.load(Ordering::SeqCst);
    assert!(most >= 2, "readers never shared (at most {most} at once)");
}

/// The lease `waiting` was granted; it panics with `why` if the wait failed.
async fn granted(waiting: JoinHandle<Result<Lease, LockError>>, why: &str) -> Lease {
    waiting.await.expect("join").expect(why)
}

/// A steady stream of overlapping readers cannot keep a waiting writer out: once it
/// waits, new readers wait behind it, and it gets the lock when the readers that were
/// already in have left.
pub async fn writer_is_not_starved(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "writer_is_not_starved").await else {
        return;
    };
    let w = h.client().await;
    let first = read(&a, &name, LONG_TTL).await;
    let writer = {
        let (w, name) = (w.coordination(), name.clone());
        tokio::spawn(async move { w.write(&name, LONG_TTL, Duration::from_secs(30)).await })
    };
    sleep(Duration::from_millis(500)).await;
    assert!(!writer.is_finished(), "the writer must wait for the reader");
    // a new reader arriving while the writer waits is refused, and a waiting one waits
    let late = h.client().await;
    let r = late.try_read(&name, LONG_TTL).await.expect("try");
    assert!(r.is_none(), "a reader barged past a waiting writer: {r:?}");
    let queued = {
        let (late, name) = (late.coordination(), name.clone());
        tokio::spawn(async move { late.read(&name, LONG_TTL, Duration::from_secs(30)).await })
    };
    sleep(Duration::from_millis(300)).await;
    assert!(!queued.is_finished(), "a reader passed a waiting writer");
    assert!(a.release(&first).await.expect("release"));
    let lease = granted(writer, "the writer gets the lock").await;
    assert_eq!(lease.access(), Access::Write);
    assert!(!queued.is_finished(), "a reader held with the writer");
    assert!(w.release(&lease).await.expect("release"));
    let later = granted(queued, "the reader follows the writer").await;
    assert!(later.token() > lease.token());
    assert!(late.release(&later).await.expect("release"));
}

/// Two writers wait behind a reader; the first to get in leaves at once, and new
/// readers are still refused while the second waits: every waiting writer keeps readers
/// out, not only the last one to say so.
pub async fn second_waiting_writer_keeps_readers_out(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "second_waiting_writer_keeps_readers_out").await else {
        return;
    };
    let first = read(&a, &name, LONG_TTL).await;
    let mut writers = Vec::new();
    for _ in 0..2 {
        let (c, name) = (h.client().await, name.clone());
        writers.push(tokio::spawn(async move {
            let got = c.write(&name, LONG_TTL, Duration::from_secs(30)).await;
            (c, got)
        }));
    }
    sleep(Duration::from_millis(500)).await;
    assert!(
        writers.iter().all(|w| !w.is_finished()),
        "writers wait for the reader"
    );
    assert!(a.release(&first).await.expect("release"));
    let first_in = loop {
        if let Some(i) = writers
            .iter()
            .position(tokio::task::JoinHandle::is_finished)
        {
            break i;
        }
        sleep(Duration::from_millis(2)).await;
    };
    let (c1, got) = writers.swap_remove(first_in).await.expect("join");
    let lease = got.expect("a writer gets the lock");
    assert!(c1.release(&lease).await.expect("release"));
    let reader = h.client().await;
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        let r = reader.try_read(&name, LONG_TTL).await.expect("try");
        assert!(
            r.is_none(),
            "a reader overtook the second waiting writer: {r:?}"
        );
        sleep(Duration::from_millis(10)).await;
    }
    let second = writers.pop().expect("the second writer");
    let (c2, got) = second.await.expect("join");
    let lease2 = got.expect("the second writer gets the lock");
    assert!(lease2.token() > lease.token());
    assert!(c2.release(&lease2).await.expect("release"));
    let after = read(&reader, &name, LONG_TTL).await;
    assert!(reader.release(&after).await.expect("release"));
}

/// A crashed writer's lock frees within its TTL, for readers and writers alike.
pub async fn rw_crashed_writer_expires(h: &impl Harness) {
    let Some((b, name)) = shared_case(h, "rw_crashed_writer_expires").await else {
        return;
    };
    let a = h.client().await;
    let ttl = h.short_ttl();
    let w = a.try_write(&name, ttl).await.expect("try").expect("free");
    let crashed_at = Instant::now();
    a.crash();
    let bound = expiry_bound(h, ttl);
    let r = b
        .read(&name, LONG_TTL, bound)
        .await
        .expect("a crashed writer's lock must free within its TTL");
    assert!(crashed_at.elapsed() <= bound + Duration::from_millis(500));
    assert!(r.token() > w.token());
    assert!(b.release(&r).await.expect("release"));
}
