//! The report table.

use std::fmt::Write as _;
use std::time::Duration;

use crate::checker::Verdict;

/// One row: a backend under one fault, over one or more runs.
#[derive(Clone, Debug)]
pub struct Row {
    /// Backend label.
    pub backend: String,
    /// Fault label (with "(unfenced)" for runs without the fence).
    pub nemesis: String,
    /// Verdicts summed over the runs.
    pub verdict: Verdict,
    /// Recovery times of the runs.
    pub recoveries: Vec<Duration>,
    /// Runs in which the fault could not be applied.
    pub not_applied: u32,
}

/// A paused writer's runs ([`crate::Nemesis::PauseWriter`]): in how many the fence
/// that refused its stale write had been raised by a later reader alone.
#[derive(Clone, Debug, Default)]
pub struct WriterRow {
    /// Backend label.
    pub backend: String,
    /// Fault label (with "(unfenced)").
    pub nemesis: String,
    /// Runs made.
    pub runs: u32,
    /// Runs whose stale write was refused before any later writer had read or written
    /// above its token: the reader's read raised the fence that refused it.
    pub refused_by_reader_alone: u32,
}

/// A Markdown table of the paused writer's runs.
#[must_use]
pub fn writer_table(rows: &[WriterRow]) -> String {
    let mut out = String::from(
        "| backend | fault | runs | stale write refused by a later reader's fence alone |\n|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            r.backend, r.nemesis, r.runs, r.refused_by_reader_alone
        );
    }
    out
}

fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

/// A Markdown table of the rows.
#[must_use]
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| backend | fault | ops | overlaps | stale writes accepted | fence rejections | tokens backwards | lost increments | recovery p50 / max ms |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let v = &r.verdict;
        let _ = writeln!(
            out,
            "| {} | {}{} | {} | {} | {} | {} | {} | {} | {} |",
            r.backend,
            r.nemesis,
            not_applied(r),
            v.ops,
            v.overlaps,
            v.stale_accepted,
            v.fence_rejections,
            v.tokens_backwards,
            v.lost_increments,
            recovery(r)
        );
    }
    out
}

/// Adds one verdict into a sum.
pub fn add(sum: &mut Verdict, v: &Verdict) {
    sum.ops += v.ops;
    sum.overlaps += v.overlaps;
    sum.stale_accepted += v.stale_accepted;
    sum.fence_rejections += v.fence_rejections;
    sum.lost_increments += v.lost_increments;
    sum.observed += v.observed;
    sum.observed_backwards += v.observed_backwards;
    sum.tokens_backwards += v.tokens_backwards;
    sum.requests += v.requests;
    sum.duplicate_effects += v.duplicate_effects;
    sum.results_disagreeing += v.results_disagreeing;
}

/// The note on runs in which the fault could not be applied.
fn not_applied(r: &Row) -> String {
    if r.not_applied > 0 {
        format!(" ({} not applied)", r.not_applied)
    } else {
        String::new()
    }
}

/// The p50 / max of a row's recoveries.
fn recovery(r: &Row) -> String {
    let mut rec = r.recoveries.clone();
    rec.sort();
    match (rec.get(rec.len().saturating_sub(1) / 2), rec.last()) {
        (Some(p50), Some(max)) => format!("{} / {}", ms(*p50), ms(*max)),
        _ => "–".into(),
    }
}

/// A Markdown table of idempotency rows: requests, runs, what the effects and results
/// came to, and how soon a crashed or paused runner's request was finished by another.
#[must_use]
pub fn idempotency_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| backend | fault | requests | runs recorded | duplicate effects | results disagreeing | runs refused by the fence | takeover p50 / max ms |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let v = &r.verdict;
        let _ = writeln!(
            out,
            "| {} | {}{} | {} | {} | {} | {} | {} | {} |",
            r.backend,
            r.nemesis,
            not_applied(r),
            v.requests,
            v.ops,
            v.duplicate_effects,
            v.results_disagreeing,
            v.fence_rejections,
            recovery(r)
        );
    }
    out
}

/// A Markdown table of election rows: leaderships for ops, and what the observers saw.
#[must_use]
pub fn election_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| backend | fault | leaderships | overlapping leaderships | stale writes accepted | fence rejections | leaderships' tokens backwards | leader changes observed | observed epochs going back | recovery p50 / max ms |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let v = &r.verdict;
        let _ = writeln!(
            out,
            "| {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.backend,
            r.nemesis,
            not_applied(r),
            v.ops,
            v.overlaps,
            v.stale_accepted,
            v.fence_rejections,
            v.tokens_backwards,
            v.observed,
            v.observed_backwards,
            recovery(r)
        );
    }
    out
}

/// A Markdown table of clock rows: the mutex table's columns plus the grants whose
/// token went backwards, and whether the backend promises exclusion under the fault.
#[must_use]
pub fn clock_table(rows: &[(Row, bool)]) -> String {
    let mut out = String::from(
        "| backend | fault | exclusion promised | ops | overlaps | stale writes accepted | fence rejections | tokens backwards | lost increments | recovery p50 / max ms |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (r, promised) in rows {
        let v = &r.verdict;
        let _ = writeln!(
            out,
            "| {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.backend,
            r.nemesis,
            not_applied(r),
            if *promised { "yes" } else { "no" },
            v.ops,
            v.overlaps,
            v.stale_accepted,
            v.fence_rejections,
            v.tokens_backwards,
            v.lost_increments,
            recovery(r)
        );
    }
    out
}
