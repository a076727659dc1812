//! Fencing tokens strictly increase across holders.

use super::{LONG_TTL, clients, expiry_bound, take, take_within, unique};
use crate::Harness;

/// Successive holders, on different clients, after releases: tokens strictly increase.
pub async fn fencing_increases_across_releases(h: &impl Harness) {
    let name = unique("fencing_increases_across_releases");
    let clients = [h.client().await, h.client().await, h.client().await];
    let mut last = None;
    for i in 0..9 {
        let c = &clients[i % clients.len()];
        let lease = take(&**c, &name, LONG_TTL).await;
        if let Some(prev) = last {
            assert!(
                lease.token() > prev,
                "token {} after {}",
                lease.token(),
                prev
            );
        }
        last = Some(lease.token());
        assert!(c.release(&lease).await.expect("release"));
    }
}

/// A takeover after a crash also gets a higher token, and so does the holder after it.
pub async fn fencing_increases_across_expiry(h: &impl Harness) {
    let name = unique("fencing_increases_across_expiry");
    let ttl = h.short_ttl();
    let [a, b] = clients(h).await;
    let first = take(&*a, &name, ttl).await;
    a.crash();
    let second = take_within(&*b, &name, LONG_TTL, expiry_bound(h, ttl))
        .await
        .expect("takeover after crash");
    assert!(second.token() > first.token());
    assert!(b.release(&second).await.expect("release"));
    let third = take(&*b, &name, LONG_TTL).await;
    assert!(third.token() > second.token());
    assert!(b.release(&third).await.expect("release"));
}

/// Tokens of different names are independent but each stays monotonic when names
/// interleave.
pub async fn fencing_is_per_name_monotonic(h: &impl Harness) {
    let a = h.client().await;
    let x = unique("fencing_per_name_x");
    let y = unique("fencing_per_name_y");
    let mut last_x = None;
    let mut last_y = None;
    for _ in 0..4 {
        let lx = take(&*a, &x, LONG_TTL).await;
        let ly = take(&*a, &y, LONG_TTL).await;
        assert!(last_x.is_none_or(|t| lx.token() > t));
        assert!(last_y.is_none_or(|t| ly.token() > t));
        last_x = Some(lx.token());
        last_y = Some(ly.token());
        assert!(a.release(&ly).await.expect("release"));
        assert!(a.release(&lx).await.expect("release"));
    }
}
