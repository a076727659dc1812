//! The decision of one acquisition, from the head row and the holders read under its
//! lock — the same rule as the Redis script's.

use dlock_core::Access;

/// The name's head row: the counter, the holders' permit count, the writer intent.
pub(crate) struct Head {
    pub token: i64,
    pub permits: i64,
    pub intent_until: i64,
    /// The database clock, in ms, read in the same statement.
    pub now: i64,
}

/// An unexpired holder.
pub(crate) struct HolderRow {
    pub owner: String,
    pub access: String,
    pub token: i64,
    pub expires_at: i64,
}

/// What the transaction does.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Ours already (a late duplicate of this acquisition committed): extend it, keep
    /// its token.
    Retake(i64),
    /// Take it with the next token.
    Grant,
    /// Not now; `wait_ms` until the earliest holder or intent lapses; `intent`: record
    /// (or extend) a waiting writer's intent.
    Refuse { wait_ms: Option<i64>, intent: bool },
    /// A semaphore held with another count.
    Mismatch(i64),
}

/// The access's tag in the `access` column.
pub(crate) fn tag(access: Access) -> &'static str {
    match access {
        Access::Write => "w",
        Access::Read => "r",
        _ => "p",
    }
}

pub(crate) fn decide(
    access: Access,
    owner: &str,
    head: &Head,
    holders: &[HolderRow],
    waits: bool,
) -> Decision {
    if let Some(mine) = holders.iter().find(|h| h.owner == owner) {
        return Decision::Retake(mine.token);
    }
    let intent_live = head.intent_until > head.now;
    let ok = match access {
        Access::Permit(n) => {
            if !holders.is_empty() && head.permits != i64::from(n) {
                return Decision::Mismatch(head.permits);
            }
            holders.len() < usize::try_from(n).unwrap_or(usize::MAX)
        }
        Access::Read => !intent_live && holders.iter().all(|h| h.access != "w"),
        _ => holders.is_empty(),
    };
    if ok {
        return Decision::Grant;
    }
    let earliest = holders.iter().map(|h| h.expires_at).min();
    let intent_end = intent_live.then_some(head.intent_until);
    let soonest = match (earliest, intent_end) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Decision::Refuse {
        wait_ms: soonest.map(|t| (t - head.now).max(0)),
        intent: access == Access::Write && waits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(permits: i64, intent_until: i64) -> Head {
        Head {
            token: 5,
            permits,
            intent_until,
            now: 1000,
        }
    }

    fn holder(owner: &str, access: &str, expires_at: i64) -> HolderRow {
        HolderRow {
            owner: owner.into(),
            access: access.into(),
            token: 1,
            expires_at,
        }
    }

    #[test]
    fn permits_readers_and_writers() {
        let two = [holder("a", "p", 1500), holder("b", "p", 1200)];
        assert_eq!(
            decide(Access::Permit(3), "c", &head(3, 0), &two, false),
            Decision::Grant
        );
        assert_eq!(
            decide(Access::Permit(2), "c", &head(2, 0), &two, false),
            Decision::Refuse {
                wait_ms: Some(200),
                intent: false
            }
        );
        assert_eq!(
            decide(Access::Permit(4), "c", &head(3, 0), &two, false),
            Decision::Mismatch(3)
        );
        assert_eq!(
            decide(Access::Permit(4), "a", &head(3, 0), &two, false),
            Decision::Retake(1)
        );
        let readers = [holder("a", "r", 1500)];
        assert_eq!(
            decide(Access::Read, "c", &head(0, 0), &readers, false),
            Decision::Grant
        );
        assert_eq!(
            decide(Access::Write, "c", &head(0, 0), &readers, true),
            Decision::Refuse {
                wait_ms: Some(500),
                intent: true
            }
        );
        // a live intent keeps new readers out, and bounds their wait
        assert_eq!(
            decide(Access::Read, "d", &head(0, 1100), &readers, true),
            Decision::Refuse {
                wait_ms: Some(100),
                intent: false
            }
        );
        assert_eq!(
            decide(Access::Write, "c", &head(0, 1100), &[], true),
            Decision::Grant
        );
    }
}
