//! Running a model to its bound, and reading the result.

use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

use stateright::{Checker, Model};

/// Whether the models run to their deep bounds (`DLOCK_MODEL_BOUND=deep`, as
/// `scripts/model --deep` sets it) rather than the CI ones.
#[must_use]
pub fn deep() -> bool {
    std::env::var("DLOCK_MODEL_BOUND").as_deref() == Ok("deep")
}

/// What a check of one model found.
#[derive(Debug)]
pub struct Report {
    /// The model's name.
    pub model: String,
    /// Distinct states explored.
    pub states: usize,
    /// The deepest path explored.
    pub depth: usize,
    /// Seconds it took.
    pub seconds: f64,
    /// The first property found violated (an `always` with a counterexample, or a
    /// `sometimes` never seen), and the path to it (empty for a `sometimes`).
    pub violation: Option<(String, String)>,
}

/// Explores every state of `model` reachable within its boundary (breadth first, on
/// every core) — or until a property is found violated — and reports.
pub fn check<M>(name: &str, model: M) -> Report
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + Send + Sync + PartialEq,
    M::Action: Clone + Debug + PartialEq + Send + Sync,
{
    explore(name, model, false)
}

/// As [`check`], depth first: for a mutation whose counterexample lies deep (a run to
/// a lease's end), found long before a breadth-first search would get there; its trace
/// is a path to it, not the shortest.
pub fn find<M>(name: &str, model: M) -> Report
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + Send + Sync + PartialEq,
    M::Action: Clone + Debug + PartialEq + Send + Sync,
{
    explore(name, model, true)
}

fn explore<M>(name: &str, model: M, depth_first: bool) -> Report
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + Send + Sync + PartialEq,
    M::Action: Clone + Debug + PartialEq + Send + Sync,
{
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    // a mutation's run needs its first counterexample, not the rest
    let builder = model
        .checker()
        .threads(threads)
        .finish_when(stateright::HasDiscoveries::AnyFailures);
    if depth_first {
        report(name, &builder.spawn_dfs().join(), started)
    } else {
        report(name, &builder.spawn_bfs().join(), started)
    }
}

fn report<M, C>(name: &str, checker: &C, started: Instant) -> Report
where
    M: Model,
    M::State: Clone + Debug + Hash + PartialEq,
    M::Action: Clone + Debug + PartialEq,
    C: Checker<M>,
{
    let mut violation = None;
    for property in checker.model().properties() {
        let found = checker.discovery(property.name);
        let broken = match property.expectation {
            stateright::Expectation::Always | stateright::Expectation::Eventually => {
                found.map(|path| format!("{path:#?}"))
            }
            stateright::Expectation::Sometimes => found.is_none().then(String::new),
        };
        if let Some(trace) = broken {
            violation = Some((property.name.to_owned(), trace));
            break;
        }
    }
    Report {
        model: name.to_owned(),
        states: checker.unique_state_count(),
        depth: checker.max_depth(),
        seconds: started.elapsed().as_secs_f64(),
        violation,
    }
}
