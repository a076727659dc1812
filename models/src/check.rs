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
/// every core), and reports.
pub fn check<M>(name: &str, model: M) -> Report
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + Send + Sync + PartialEq,
    M::Action: Clone + Debug + PartialEq + Send + Sync,
{
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let checker = model.checker().threads(threads).spawn_bfs().join();
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
