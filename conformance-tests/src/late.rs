//! A grant that commits after its reply was given up on: the client's attempt timed
//! out, yet the server applied it a moment later. The acquisition's next attempt (same
//! owner id) must take its own grant again at once, not wait a whole TTL behind it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dlock_core::DistributedLock;

use crate::{FaultMode, FaultProxy};

/// `connect(url, op_timeout)` makes two clients whose operations give up after
/// `op_timeout`: the late one reaches the server `url` names through a proxy, the
/// observer directly.
///
/// After one warm-up cycle (scripts loaded, statements prepared), the proxy delays every
/// reply by 1.5 × `op_timeout`, so the first attempt of an `acquire(ttl = 6 s,
/// wait = 12 s)` times out on the client while its request reaches the server and
/// commits. Once the grant is visible to `observer`, the proxy
/// passes again; the acquire must then return within 2 s (a third of the TTL), holding
/// the name under its own owner id.
///
/// # Panics
/// When the late grant never shows up, or the acquire fails or waits for the TTL.
pub async fn late_grant_is_taken_again<L, Connected>(
    url: &str,
    op_timeout: Duration,
    connect: impl Fn(String, Duration) -> Connected,
) where
    L: DistributedLock + 'static,
    Connected: Future<Output = L>,
{
    let (proxy, through) = FaultProxy::in_front_of(url).await;
    let late: Arc<dyn DistributedLock> = Arc::new(connect(through, op_timeout).await);
    let observer = connect(url.to_owned(), op_timeout).await;
    let name = crate::unique_name("late");
    let ttl = Duration::from_secs(6);
    let warm = crate::unique_name("late/warm");
    crate::cases::take_and_release(&*late, &warm, ttl).await;
    proxy.set_mode(FaultMode::DelayReplies(op_timeout * 3 / 2));
    let task = crate::steps::acquiring(&late, &name, ttl, ttl * 2);
    let end = Instant::now() + ttl;
    loop {
        if observer
            .inspect(&name)
            .await
            .is_ok_and(|info| info.is_some())
        {
            break;
        }
        assert!(
            Instant::now() < end,
            "the delayed attempt never committed on the server"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.set_mode(FaultMode::Pass);
    let healed = Instant::now();
    let lease = tokio::time::timeout(ttl * 2, task)
        .await
        .expect("acquire returned within its wait")
        .expect("acquire task")
        .expect("acquire succeeds once the network is healthy");
    let took = healed.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "acquire took {took:?} after the network healed: it waited behind its own late grant"
    );
    let holder = crate::steps::holder_of(&observer, &name).await;
    assert_eq!(
        &holder.owner,
        lease.owner(),
        "the acquisition holds its own grant"
    );
    assert_eq!(holder.token, lease.token());
    assert!(late.release(&lease).await.expect("release"));
}
