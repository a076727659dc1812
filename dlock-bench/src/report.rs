//! What a benchmark run is asked for (scenarios, options) and what it reports.

use std::time::Duration;

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
    /// How the server's own request count was read, when it was.
    pub server_count: Option<&'static str>,
    /// The figures, in scenario order.
    pub figures: Vec<Figure>,
    /// The latency distributions of the scenarios that time single operations.
    pub distributions: Vec<Distribution>,
}
