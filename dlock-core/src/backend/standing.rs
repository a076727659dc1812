//! The queue family's one rule: where an entry stands given the entries ahead of it,
//! and which of them it must watch — for the mutex, a semaphore's permits and a
//! read-write lock alike.
//!
//! | access | holds when | watches (a deletion there may change the answer) |
//! |---|---|---|
//! | `Exclusive`, `Write` | nothing is ahead | the entry right before it |
//! | `Read` | no `Write` is ahead | the nearest `Write` ahead |
//! | `Permit(n)` | fewer than `n` are ahead | the `n` entries right before it; with an entry of another count ahead, that entry and the one right before it |
//!
//! Why the last row is enough: while none of the `n` entries right before a waiter is
//! gone, at least `n` are ahead of it, so it cannot hold; and watching fewer misses a
//! release (with `n = 2`, a waiter behind holders A and B that watched only B would
//! sleep through A's release). A release therefore wakes at most `n` waiters, and only
//! those whose answer it can change — save around an entry of another count, whose
//! going (or its predecessor's) wakes every waiter behind it. Readers queue behind a
//! waiting writer, so writers do not starve.
//!
//! A semaphore's count is its oldest entry's (that entry always holds). An entry of
//! another count is refused ([`LockError::PermitsMismatch`]) when it is the oldest's
//! count it disagrees with; an entry of another count further ahead is waited for (it
//! is leaving, or was left by a killed caller and goes with its TTL), so entries of two
//! counts never hold at once.

use std::ops::Range;

use crate::{Access, LockError, LockName};

/// Where a queue entry stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The entry may hold its name now.
    Holds,
    /// It waits: the deletion of any entry ahead at these positions (indexes into
    /// `ahead`, oldest first) may change that.
    Waits(Range<usize>),
}

/// Where an entry of `me` stands behind `ahead` (the entries before it, oldest first).
///
/// # Errors
/// [`LockError::PermitsMismatch`] when the oldest entry is a permit of another count;
/// [`LockError::Backend`] when the queue mixes accesses of different primitives (each
/// primitive keeps its own queue, so only a foreign writer can cause that).
pub fn standing(name: &LockName, me: Access, ahead: &[Access]) -> Result<Standing, LockError> {
    for other in ahead {
        let same_primitive = match (me, *other) {
            (Access::Exclusive, Access::Exclusive) | (Access::Permit(_), Access::Permit(_)) => true,
            (a, b) => a.is_rw() && b.is_rw(),
        };
        if !same_primitive {
            return Err(LockError::backend_msg(format!(
                "the queue of {name} mixes {me} with {other}"
            )));
        }
    }
    let len = ahead.len();
    Ok(match me {
        Access::Permit(n) => {
            if let Some(&Access::Permit(in_use)) = ahead.first()
                && in_use != n
            {
                return Err(LockError::permits_mismatch(name, in_use, n));
            }
            // An entry of another count behind the oldest (refused, leaving, or left
            // by a killed caller) is waited out, never counted past: were it to become
            // the oldest, a caller of its count would hold beside us. It is watched,
            // and so is the entry right before it: once every entry before it is gone
            // the foreign count is the oldest's and this entry refused — it must learn
            // that, and leave, or it blocks the callers of that count behind it. (The
            // oldest is of this count, or the answer was a refusal: `first` ≥ 1.)
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            let foreign = ahead.iter().position(|a| *a != me);
            match foreign {
                Some(first) => Standing::Waits(first.saturating_sub(1)..first + 1),
                None if len < n => Standing::Holds,
                None => Standing::Waits(len - n..len),
            }
        }
        Access::Read => match ahead.iter().rposition(|a| *a == Access::Write) {
            None => Standing::Holds,
            Some(w) => Standing::Waits(w..w + 1),
        },
        Access::Exclusive | Access::Write => {
            if len == 0 {
                Standing::Holds
            } else {
                Standing::Waits(len - 1..len)
            }
        }
    })
}

/// Whether an entry of `me` behind `ahead` holds its name: [`standing`] for listing
/// holders, where an entry of a refused count is simply not one.
///
/// # Errors
/// As [`standing`], but never [`LockError::PermitsMismatch`].
pub fn holds(name: &LockName, me: Access, ahead: &[Access]) -> Result<bool, LockError> {
    match standing(name, me, ahead) {
        Ok(s) => Ok(s == Standing::Holds),
        Err(LockError::PermitsMismatch { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Access::{Exclusive, Permit, Read, Write};

    fn at(me: Access, ahead: &[Access]) -> Standing {
        standing(&LockName::new("t").unwrap(), me, ahead).unwrap()
    }

    #[test]
    fn the_mutex_waits_for_its_predecessor() {
        assert_eq!(at(Exclusive, &[]), Standing::Holds);
        assert_eq!(
            at(Exclusive, &[Exclusive, Exclusive]),
            Standing::Waits(1..2)
        );
    }

    #[test]
    fn permits_admit_n_and_watch_the_n_before() {
        let p = Permit(2);
        assert_eq!(at(p, &[]), Standing::Holds);
        assert_eq!(at(p, &[p]), Standing::Holds);
        assert_eq!(at(p, &[p, p]), Standing::Waits(0..2));
        assert_eq!(at(p, &[p, p, p, p]), Standing::Waits(2..4));
    }

    #[test]
    fn readers_share_until_a_writer_is_ahead() {
        assert_eq!(at(Read, &[Read, Read]), Standing::Holds);
        assert_eq!(at(Read, &[Read, Write, Read]), Standing::Waits(1..2));
        assert_eq!(at(Read, &[Write, Read, Write, Read]), Standing::Waits(2..3));
        assert_eq!(at(Write, &[Read]), Standing::Waits(0..1));
        assert_eq!(at(Write, &[]), Standing::Holds);
    }

    #[test]
    fn disagreeing_counts_and_mixed_queues_are_errors() {
        let name = LockName::new("t").unwrap();
        assert!(matches!(
            standing(&name, Permit(3), &[Permit(2)]),
            Err(LockError::PermitsMismatch {
                in_use: 2,
                asked: 3,
                ..
            })
        ));
        // only the oldest entry's count refuses; an entry of another count behind it
        // is waited for, never counted past (it could become the oldest: a caller of
        // its count would then hold beside us)
        assert_eq!(
            at(Permit(2), &[Permit(2), Permit(3)]),
            Standing::Waits(0..2)
        );
        // ... with the entry right before it: its deletion may make this entry
        // refused (the queue rule model's case: behind [A(2), B(3), C(3)], A's release
        // leaves B the oldest)
        assert_eq!(
            at(Permit(2), &[Permit(2), Permit(3), Permit(2)]),
            Standing::Waits(0..2)
        );
        assert_eq!(
            at(Permit(1), &[Permit(1), Permit(4), Permit(4)]),
            Standing::Waits(0..2)
        );
        assert_eq!(
            at(Permit(2), &[Permit(2), Permit(3), Permit(3)]),
            Standing::Waits(0..2)
        );
        assert_eq!(
            at(Permit(3), &[Permit(3), Permit(3), Permit(3), Permit(2)]),
            Standing::Waits(2..4)
        );
        // the review's case: [X(3) refused, B(2) holding]: a caller of 3 waits for B
        assert_eq!(
            at(Permit(3), &[Permit(3), Permit(2)]),
            Standing::Waits(0..2)
        );
        assert!(!holds(&name, Permit(3), &[Permit(2)]).unwrap());
        assert!(holds(&name, Permit(2), &[Permit(2)]).unwrap());
        assert!(standing(&name, Read, &[Exclusive]).is_err());
        assert!(standing(&name, Exclusive, &[Permit(1)]).is_err());
    }
}
