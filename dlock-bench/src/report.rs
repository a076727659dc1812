//! What a benchmark run is asked for (scenarios, options) and what it reports.

use std::time::Duration;

use dlock_any::LockError;

use crate::stats::Samples;

/// The scenarios `run` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// One client, acquire + release of a free lock.
    Uncontended,
    /// A blocked waiter's time from the holder's release to holding.
    Handoff,
    /// Many clients on one lock.
    Contended,
    /// Many tasks on distinct names over one client.
    Parallel,
    /// Many locks held with renewing guards: renewal traffic, memory, CPU.
    Held,
    /// A semaphore's permits: cycle against the mutex floor, hand-off, contention.
    Semaphore,
    /// A read-write lock: read and write cycles against the mutex floor, a mixed load.
    RwLock,
    /// Leader election: resignation to observer and to standby, against the hand-off
    /// floor.
    Election,
    /// How costs grow: waiters on one name, locks held, distinct names over time. Not
    /// in the default set (it takes minutes); ask for it by name.
    Scale,
}

impl Scenario {
    /// Every scenario, in the order a run measures them.
    pub const ALL: [Scenario; 9] = [
        Self::Uncontended,
        Self::Handoff,
        Self::Contended,
        Self::Parallel,
        Self::Held,
        Self::Semaphore,
        Self::RwLock,
        Self::Election,
        Self::Scale,
    ];

    /// Whether a run with no scenario named measures it.
    #[must_use]
    pub fn by_default(self) -> bool {
        self != Self::Scale
    }

    /// The scenario's name on the command line and in reports.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Uncontended => "uncontended",
            Self::Handoff => "handoff",
            Self::Contended => "contended",
            Self::Parallel => "parallel",
            Self::Held => "held",
            Self::Semaphore => "semaphore",
            Self::RwLock => "rwlock",
            Self::Election => "election",
            Self::Scale => "scale",
        }
    }
}

impl std::str::FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|c| c.name()).collect();
                format!("unknown scenario {s:?}: use {}", names.join(", "))
            })
    }
}

/// How a run is shaped (`dlock bench`'s options).
#[derive(Clone, Debug)]
pub struct Options {
    /// Scenarios to run; empty for all.
    pub scenarios: Vec<Scenario>,
    /// Length of the contended and parallel runs.
    pub duration: Duration,
    /// Measured cycles of the uncontended scenario (plus a tenth to warm up).
    pub cycles: usize,
    /// Hand-off trials.
    pub trials: usize,
    /// Clients in the contended scenario.
    pub clients: usize,
    /// Tasks in the parallel scenario.
    pub parallel: usize,
    /// Locks held in the held scenario.
    pub held_locks: usize,
    /// TTL of the held locks (held for three of them).
    pub held_ttl: Duration,
    /// Whether to measure the raw-protocol floor beside dlock.
    pub floor: bool,
    /// The scale scenario's most waiters on one name (of 1, 10, 100, 1 000).
    pub scale_waiters: usize,
    /// The scale scenario's most held locks (of 1 000, 10 000, 100 000).
    pub scale_held: usize,
    /// Distinct names the scale scenario acquires and releases once each.
    pub scale_names: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            scenarios: Vec::new(),
            duration: Duration::from_secs(5),
            cycles: 2000,
            trials: 30,
            clients: 8,
            parallel: 64,
            held_locks: 10_000,
            held_ttl: Duration::from_secs(3),
            floor: true,
            scale_waiters: 100,
            scale_held: 10_000,
            scale_names: 10_000,
        }
    }
}

/// One reported figure: dlock's, and the floor's where there is one.
#[derive(Clone, Debug)]
pub struct Figure {
    /// The scenario it belongs to.
    pub scenario: &'static str,
    /// What it measures (`cycle p50 ms`, `cycles/s`, …).
    pub metric: &'static str,
    /// dlock's figure.
    pub dlock: f64,
    /// The floor's figure, measured in the same run.
    pub floor: Option<f64>,
}

impl Figure {
    /// The median and the 99th percentile of dlock's samples, named `metrics`, each
    /// beside the floor's when the floor ran (`raw`).
    pub(crate) fn p50_p99(
        scenario: &'static str,
        metrics: [&'static str; 2],
        ours: &Samples,
        raw: Option<&Samples>,
    ) -> [Figure; 2] {
        let at = |metric, p| Figure {
            scenario,
            metric,
            dlock: ours.percentile_ms(p),
            floor: raw.map(|r| r.percentile_ms(p)),
        };
        [at(metrics[0], 50.0), at(metrics[1], 99.0)]
    }
}

/// One latency distribution of a scenario, dlock's and the floor's, for a CDF plot.
#[derive(Clone, Debug)]
pub struct Distribution {
    /// The scenario it belongs to.
    pub scenario: &'static str,
    /// What was timed (`cycle`, `hand-off`, `wait`).
    pub what: &'static str,
    /// dlock's samples at [`CDF_POINTS`] evenly spaced ranks, in ms.
    pub dlock: Vec<f64>,
    /// The floor's, measured in the same run, when there is one.
    pub floor: Option<Vec<f64>>,
}

/// Points kept of each distribution.
pub const CDF_POINTS: usize = 201;

impl Distribution {
    pub(crate) fn of(
        scenario: &'static str,
        what: &'static str,
        ours: &Samples,
        raw: Option<&Samples>,
    ) -> Self {
        Self {
            scenario,
            what,
            dlock: ours.quantiles_ms(CDF_POINTS),
            floor: raw
                .filter(|r| !r.is_empty())
                .map(|r| r.quantiles_ms(CDF_POINTS)),
        }
    }
}

/// What a run found.
#[derive(Clone, Debug)]
pub struct Report {
    /// The backend's name (`redis`, `postgres`, …).
    pub backend: &'static str,
    /// The URL, without its password.
    pub url: String,
    /// What the floor is, when there was one.
    pub floor: Option<&'static str>,
    /// What the peer is, when the backend has one ([`crate::peer`]): the figures whose
    /// metric ends in "vs peer" hold the peer's figure where the others hold the floor's.
    pub peer: Option<&'static str>,
    /// How the server's own request count was read, when it was.
    pub server_count: Option<&'static str>,
    /// The figures, in scenario order.
    pub figures: Vec<Figure>,
    /// The latency distributions of the scenarios that time single operations.
    pub distributions: Vec<Distribution>,
    /// The scenarios that failed, with their errors (the others' figures are kept).
    pub failed: Vec<(Scenario, String)>,
    /// What the run could not remove from the server at its end, if anything
    /// ([`crate::scratch::Scratch::clean`]).
    pub left_behind: Option<String>,
}

/// Where a run stands, for [`crate::run_with_progress`]'s callback.
#[derive(Debug)]
#[non_exhaustive]
pub enum Step<'a> {
    /// A scenario starts.
    Started(Scenario),
    /// A scenario ended with these figures, after this long.
    Finished(Scenario, &'a [Figure], Duration),
    /// A scenario failed (the run goes on with the next).
    Failed(Scenario, &'a LockError),
}

/// The scenarios of a run as they start and end: told to the callback, failures kept.
pub(crate) struct Steps<'p> {
    progress: &'p (dyn Fn(Step<'_>) + Sync),
    started: std::time::Instant,
    pub(crate) failed: Vec<(Scenario, String)>,
}

impl<'p> Steps<'p> {
    pub(crate) fn new(progress: &'p (dyn Fn(Step<'_>) + Sync)) -> Self {
        Self {
            progress,
            started: std::time::Instant::now(),
            failed: Vec::new(),
        }
    }

    /// A scenario starts; where its figures will begin.
    pub(crate) fn start(&mut self, s: Scenario, figures_so_far: usize) -> usize {
        self.started = std::time::Instant::now();
        (self.progress)(Step::Started(s));
        figures_so_far
    }

    /// Runs a scenario whose answer is its figures: started, run, its figures kept (or
    /// its error), ended. (`run` comes boxed: a scenario's future is large.)
    pub(crate) async fn run_figures(
        &mut self,
        s: Scenario,
        figures: &mut Vec<Figure>,
        run: impl std::future::Future<Output = Result<Vec<Figure>, LockError>>,
    ) {
        let at = self.start(s, figures.len());
        let done = run.await.map(|f| figures.extend(f));
        self.end(s, at, done, figures);
    }

    /// A scenario ended: its figures from `at` on, or its error (kept, and its partial
    /// figures with it).
    pub(crate) fn end(
        &mut self,
        s: Scenario,
        at: usize,
        done: Result<(), LockError>,
        figures: &[Figure],
    ) {
        match done {
            Ok(()) => (self.progress)(Step::Finished(
                s,
                figures.get(at..).unwrap_or_default(),
                self.started.elapsed(),
            )),
            Err(e) => {
                (self.progress)(Step::Failed(s, &e));
                self.failed.push((s, e.to_string()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn a_failed_scenario_is_told_and_kept_and_the_run_goes_on() {
        let told = Mutex::new(Vec::new());
        let progress = |s: Step<'_>| {
            let line = match s {
                Step::Started(s) => format!("start {}", s.name()),
                Step::Finished(s, f, _) => format!("done {} {}", s.name(), f.len()),
                Step::Failed(s, e) => format!("failed {} {e}", s.name()),
            };
            told.lock().unwrap().push(line);
        };
        let mut steps = Steps::new(&progress);
        let figure = |scenario| Figure {
            scenario,
            metric: "m",
            dlock: 1.0,
            floor: None,
        };
        let mut figures = vec![figure("uncontended")];
        let at = steps.start(Scenario::Held, figures.len());
        steps.end(
            Scenario::Held,
            at,
            Err(LockError::backend_msg(
                "only 9795 of 10000 guards still held",
            )),
            &figures,
        );
        let at = steps.start(Scenario::Election, figures.len());
        figures.push(figure("election"));
        steps.end(Scenario::Election, at, Ok(()), &figures);
        assert_eq!(steps.failed.len(), 1);
        assert_eq!(steps.failed[0].0, Scenario::Held);
        let told = told.into_inner().unwrap();
        assert_eq!(told[0], "start held");
        assert!(
            told[1].starts_with("failed held") && told[1].contains("9795"),
            "{told:?}"
        );
        assert_eq!(told[2..], ["start election", "done election 1"]);
    }
}
