//! When a guard renews: about a third into its lease, rounded up to a grid shared by
//! the whole process, so guards with the same TTL come due at the same instant and a
//! backend can send their renewals together (one script call, one stream message
//! batch, one session round trip) instead of one request per lock spread over time.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// Renewals are due on steps of ttl/12 from one process-wide origin. Rounding up by at
/// most one step moves a renewal from ttl/3 to at most 5·ttl/12 into the lease, which
/// still leaves more than half of it for retries.
const STEPS_PER_TTL: u32 = 12;

/// The instant `lease_sent + ttl/3`, rounded up to the process-wide renewal grid.
pub(crate) fn renewal_due(lease_sent: Instant, ttl: Duration) -> Instant {
    align_up(lease_sent + ttl / 3, ttl / STEPS_PER_TTL)
}

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// The first grid point at or after `t` (or the origin, if `t` is before it).
fn align_up(t: Instant, step: Duration) -> Instant {
    let step_ns = step.as_nanos().max(1);
    let since = t.saturating_duration_since(origin()).as_nanos();
    let steps = since.div_ceil(step_ns);
    let offset = steps.saturating_mul(step_ns);
    let offset = Duration::new(
        u64::try_from(offset / 1_000_000_000).unwrap_or(u64::MAX),
        u32::try_from(offset % 1_000_000_000).unwrap_or(0),
    );
    origin() + offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn leases_sent_within_one_step_renew_at_the_same_instant() {
        let ttl = Duration::from_millis(1200);
        let base = Instant::now();
        let due: Vec<Instant> = (0..5)
            .map(|i| renewal_due(base + Duration::from_millis(i * 7), ttl))
            .collect();
        let mut distinct = due.clone();
        distinct.dedup();
        // 5 sends spread over 28 ms fall into one 100 ms grid step, or straddle one
        // boundary: one or two distinct instants, never five.
        assert!(
            distinct.len() <= 2,
            "{} distinct renewal instants",
            distinct.len()
        );
        for (i, d) in due.iter().enumerate() {
            let sent = base + Duration::from_millis(i as u64 * 7);
            assert!(
                *d >= sent + ttl / 3,
                "never earlier than a third of the TTL"
            );
            assert!(
                *d <= sent + ttl / 3 + ttl / STEPS_PER_TTL,
                "at most one grid step later"
            );
        }
    }

    #[test]
    fn align_up_is_idempotent_on_grid_points() {
        let step = Duration::from_millis(250);
        let p = align_up(origin() + Duration::from_millis(1), step);
        assert_eq!(p, origin() + step);
        assert_eq!(align_up(p, step), p);
    }
}
