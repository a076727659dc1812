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
    /// The owner id of the oldest live waiter in the key's queue, if anyone waits.
    pub first_in_line: Option<String>,
}

/// An unexpired row of the holders table: a holder, or a waiting writer's intent
/// (access `i`).
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

/// The `access` tag of a waiting writer's intent row.
pub(crate) const INTENT: &str = "i";

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
    rows: &[HolderRow],
    waits: bool,
) -> Decision {
    let (intents, holders): (Vec<&HolderRow>, Vec<&HolderRow>) =
        rows.iter().partition(|h| h.access == INTENT);
    if let Some(mine) = holders.iter().find(|h| h.owner == owner) {
        return Decision::Retake(mine.token);
    }
    // another writer waits (each keeps its own intent; the head's column is where
    // clients before dlock 0.2 kept a single one)
    let others_wait = intents.iter().any(|i| i.owner != owner);
    let intent_live = head.intent_until > head.now || others_wait;
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
    let earliest = rows.iter().map(|h| h.expires_at).min();
    // the intent rows' ends are in `earliest`; the head's column only if it is live
    let intent_end = (head.intent_until > head.now).then_some(head.intent_until);
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
            first_in_line: None,
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
    fn a_second_waiting_writer_keeps_readers_out_after_the_first_got_in() {
        // writer a waited and got in (its intent row became its holder row) and left;
        // writer b still waits: its intent refuses a new reader
        let b_waits = [holder("b", INTENT, 1300)];
        assert_eq!(
            decide(Access::Read, "r", &head(0, 0), &b_waits, false),
            Decision::Refuse {
                wait_ms: Some(300),
                intent: false
            }
        );
        // b itself is not held back by its own intent, and a third writer by nothing
        // but holders
        assert_eq!(
            decide(Access::Write, "b", &head(0, 0), &b_waits, true),
            Decision::Grant
        );
        assert_eq!(
            decide(Access::Write, "c", &head(0, 0), &b_waits, true),
            Decision::Grant
        );
        // an intent is never mistaken for a holder of the same owner
        assert!(!matches!(
            decide(
                Access::Write,
                "b",
                &head(0, 0),
                &[holder("x", "r", 1500), holder("b", INTENT, 1300)],
                true
            ),
            Decision::Retake(_)
        ));
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
