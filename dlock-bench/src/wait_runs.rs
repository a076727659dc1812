//! The hand-off and contended scenarios of a run: dlock's rounds, each followed by the
//! floor's and (on PostgreSQL) the peer's, so all three see the same machine load.

use dlock_any::LockError;

use crate::floor_runs::Raw;
use crate::floor_runs::{connect_many, floor_contended, floor_handoff};
use crate::report::{Distribution, Figure, Options};
use crate::stats::Samples;
use crate::{peer, scenarios};

/// What the rounds of one run share.
pub(crate) struct Round<'a> {
    /// The run's URL (its own table or prefix: `crate::scratch`).
    pub url: &'a str,
    pub args: &'a Options,
    /// Rounds each side runs, alternating.
    pub rounds: u32,
    /// Whether the backend has a peer to measure ([`crate::peer`]).
    pub peer: bool,
}

/// A blocked waiter's time from the holder's release to holding, against the floor's
/// raw blocking lock and the peer's.
///
/// # Errors
/// Connecting, or a scenario's error.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub(crate) async fn handoff(
    r: &Round<'_>,
    figures: &mut Vec<Figure>,
    distributions: &mut Vec<Distribution>,
) -> Result<(), LockError> {
    // alternating r.rounds: a third of the trials each, ours then the floor's
    let per_round = (r.args.trials / r.rounds as usize).max(3);
    let (mut ours, mut raw, mut has_raw) = (Samples::default(), Samples::default(), false);
    let mut theirs = Samples::default();
    for _ in 0..r.rounds {
        ours.extend(
            scenarios::handoff(
                dlock_any::connect(r.url).await?,
                dlock_any::connect(r.url).await?,
                per_round,
            )
            .await?,
        );
        if r.args.floor
            && let Some(s) = floor_handoff(r.url, per_round, Raw::Floor).await?
        {
            raw.extend(s);
            has_raw = true;
        }
        if r.peer
            && let Some(s) = floor_handoff(r.url, per_round, Raw::Peer).await?
        {
            theirs.extend(s);
        }
    }
    distributions.push(Distribution::of("handoff", "hand-off", &ours, Some(&raw)));
    figures.extend(Figure::p50_p99(
        "handoff",
        ["p50 ms", "p99 ms"],
        &ours,
        has_raw.then_some(&raw),
    ));
    for (metric, p) in [("p50 ms vs peer", 50.0), ("p99 ms vs peer", 99.0)] {
        figures.extend(peer::versus(
            r.peer,
            "handoff",
            metric,
            ours.percentile_ms(p),
            &theirs,
            &|s| s.percentile_ms(p),
        ));
    }
    Ok(())
}

/// Many clients on one lock, against the floor's raw blocking lock and the peer's.
///
/// # Errors
/// Connecting, or a scenario's error.
///
/// # Cancel safety
/// As [`handoff`].
pub(crate) async fn contended(
    r: &Round<'_>,
    figures: &mut Vec<Figure>,
    distributions: &mut Vec<Distribution>,
) -> Result<(), LockError> {
    let slice = r.args.duration / r.rounds;
    let (mut ours_cycles, mut ours_waits) = (0.0, Samples::default());
    let (mut raw_cycles, mut raw_waits, mut has_raw) = (0.0, Samples::default(), false);
    let (mut their_cycles, mut their_waits) = (0.0, Samples::default());
    for _ in 0..r.rounds {
        let c = scenarios::contended(connect_many(r.url, r.args.clients).await?, slice).await?;
        ours_cycles += c.cycles_per_s;
        ours_waits.extend(c.waits);
        if r.args.floor
            && let Some((cycles, waits)) =
                floor_contended(r.url, r.args.clients, slice, Raw::Floor).await?
        {
            raw_cycles += cycles;
            raw_waits.extend(waits);
            has_raw = true;
        }
        if r.peer
            && let Some((cycles, waits)) =
                floor_contended(r.url, r.args.clients, slice, Raw::Peer).await?
        {
            their_cycles += cycles;
            their_waits.extend(waits);
        }
    }
    let raw_some = |v: f64| has_raw.then_some(v);
    distributions.push(Distribution::of(
        "contended",
        "wait",
        &ours_waits,
        Some(&raw_waits),
    ));
    figures.push(Figure {
        scenario: "contended",
        metric: "cycles/s",
        dlock: ours_cycles / f64::from(r.rounds),
        floor: raw_some(raw_cycles / f64::from(r.rounds)),
    });
    figures.push(Figure {
        scenario: "contended",
        metric: "p99 wait ms",
        dlock: ours_waits.percentile_ms(99.0),
        floor: raw_some(raw_waits.percentile_ms(99.0)),
    });
    figures.push(Figure {
        scenario: "contended",
        metric: "max wait ms",
        dlock: ours_waits.max_ms(),
        floor: raw_some(raw_waits.max_ms()),
    });
    figures.extend(peer::versus(
        r.peer,
        "contended",
        "cycles/s vs peer",
        ours_cycles / f64::from(r.rounds),
        &their_waits,
        &|_| their_cycles / f64::from(r.rounds),
    ));
    figures.extend(peer::versus(
        r.peer,
        "contended",
        "p99 wait ms vs peer",
        ours_waits.percentile_ms(99.0),
        &their_waits,
        &|s| s.percentile_ms(99.0),
    ));
    Ok(())
}
