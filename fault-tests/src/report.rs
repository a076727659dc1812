//! The report table.

use std::fmt::Write as _;
use std::time::Duration;

use crate::checker::Verdict;
use crate::run::Outcome;

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

impl Row {
    /// The row of one run: `backend` under the fault labelled `nemesis`.
    #[must_use]
    pub fn of(backend: &str, nemesis: impl Into<String>, o: &Outcome) -> Self {
        Self {
            backend: backend.into(),
            nemesis: nemesis.into(),
            verdict: o.verdict.clone(),
            recoveries: o.recovery.into_iter().collect(),
            not_applied: u32::from(!o.applied),
        }
    }
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

/// The mutex table's columns between the fault and the recovery.
const MUTEX_COLUMNS: [&str; 6] = [
    "ops",
    "overlaps",
    "stale writes accepted",
    "fence rejections",
    "tokens backwards",
    "lost increments",
];

/// A verdict's cells under [`MUTEX_COLUMNS`].
fn mutex_cells(v: &Verdict) -> Vec<String> {
    let counts = [v.ops, v.overlaps, v.stale_accepted, v.fence_rejections];
    cells(&counts, &[v.tokens_backwards, v.lost_increments])
}

/// A Markdown table of the rows.
#[must_use]
pub fn table(rows: &[Row]) -> String {
    let rows = rows.iter().map(|r| (r, mutex_cells(&r.verdict)));
    fault_table(&MUTEX_COLUMNS, "recovery", rows)
}

/// A table with a row per backend and fault: "backend | fault", then `columns` (a row
/// brings its cells), then the p50 / max of its `timed` durations — the fault label
/// noting runs in which the fault could not be applied.
fn fault_table<'a>(
    columns: &[&str],
    timed: &str,
    rows: impl Iterator<Item = (&'a Row, Vec<String>)>,
) -> String {
    let mut out = format!(
        "| backend | fault | {} | {timed} p50 / max ms |\n",
        columns.join(" | ")
    );
    out += &format!("|{}\n", "---|".repeat(columns.len() + 3));
    for (r, middle) in rows {
        let _ = writeln!(
            out,
            "| {} | {}{} | {} | {} |",
            r.backend,
            r.nemesis,
            not_applied(r),
            middle.join(" | "),
            recovery(r)
        );
    }
    out
}

/// Counts as table cells (two slices, so that callers can keep lines short).
fn cells(first: &[u64], then: &[u64]) -> Vec<String> {
    first.iter().chain(then).map(u64::to_string).collect()
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
    fault_table(
        &[
            "requests",
            "runs recorded",
            "duplicate effects",
            "results disagreeing",
            "runs refused by the fence",
        ],
        "takeover",
        rows.iter().map(|r| {
            let v = &r.verdict;
            let counts = [v.requests, v.ops, v.duplicate_effects];
            (
                r,
                cells(&counts, &[v.results_disagreeing, v.fence_rejections]),
            )
        }),
    )
}

/// A Markdown table of election rows: leaderships for ops, and what the observers saw.
#[must_use]
pub fn election_table(rows: &[Row]) -> String {
    fault_table(
        &[
            "leaderships",
            "overlapping leaderships",
            "stale writes accepted",
            "fence rejections",
            "leaderships' tokens backwards",
            "leader changes observed",
            "observed epochs going back",
        ],
        "recovery",
        rows.iter().map(|r| {
            let v = &r.verdict;
            let counts = [v.ops, v.overlaps, v.stale_accepted, v.fence_rejections];
            let seen = [v.tokens_backwards, v.observed, v.observed_backwards];
            (r, cells(&counts, &seen))
        }),
    )
}

/// A Markdown table of clock rows: the mutex table's columns plus the grants whose
/// token went backwards, and whether the backend promises exclusion under the fault.
#[must_use]
pub fn clock_table(rows: &[(Row, bool)]) -> String {
    let columns = [&["exclusion promised"][..], &MUTEX_COLUMNS].concat();
    let rows = rows.iter().map(|(r, promised)| {
        let promised = if *promised { "yes" } else { "no" };
        let middle = [vec![promised.to_owned()], mutex_cells(&r.verdict)].concat();
        (r, middle)
    });
    fault_table(&columns, "recovery", rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        let verdict = Verdict {
            ops: 9,
            overlaps: 1,
            fence_rejections: 3,
            ..Verdict::default()
        };
        Row {
            backend: "redis".into(),
            nemesis: "kill -9 holder".into(),
            verdict,
            recoveries: vec![Duration::from_millis(40), Duration::from_millis(700)],
            not_applied: 1,
        }
    }

    #[test]
    fn the_tables_keep_faults_md_columns() {
        let rows = [row()];
        assert_eq!(
            table(&rows),
            "| backend | fault | ops | overlaps | stale writes accepted | fence rejections | tokens backwards | lost increments | recovery p50 / max ms |\n|---|---|---|---|---|---|---|---|---|\n\
             | redis | kill -9 holder (1 not applied) | 9 | 1 | 0 | 3 | 0 | 0 | 40 / 700 |\n"
        );
        let tables = [
            (
                election_table(&rows),
                "| 9 | 1 | 0 | 3 | 0 | 0 | 0 | 40 / 700 |\n",
            ),
            (
                idempotency_table(&rows),
                "| 0 | 9 | 0 | 0 | 3 | 40 / 700 |\n",
            ),
            (
                clock_table(&[(row(), true)]),
                "| yes | 9 | 1 | 0 | 3 | 0 | 0 | 40 / 700 |\n",
            ),
        ];
        for (t, last) in tables {
            let bars: Vec<usize> = t.lines().map(|l| l.matches('|').count()).collect();
            assert!(bars.iter().all(|&n| n == bars[0]), "{t}");
            assert!(t.starts_with("| backend | fault | "), "{t}");
            assert!(t.ends_with(last), "{t}");
        }
    }
}
