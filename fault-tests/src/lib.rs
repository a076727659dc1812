//! # dlock-faults
//!
//! Jepsen-style fault injection for every dlock backend. Worker processes
//! (`dlock-fault-worker`) take a lock — the mutex, one of a semaphore's permits, or a
//! side of a read-write lock ([`Workload`]) — over and over and read-modify-write a
//! counter in a [`FencedStore`] under it (readers only read); a [`Nemesis`] kills, pauses or partitions a holder,
//! restarts a server or kills cluster members; the [`check`]er reads the store's log
//! (one monotonic clock) for overlapping validity windows, stale writes accepted,
//! fence rejections and lost increments; [`report::table`] prints the result.
//!
//! The short version runs in CI (`tests/faults.rs`); the long one is the
//! `dlock-faults` binary, which wrote `FAULTS.md`:
//!
//! ```text
//! eval "$(scripts/services up --cluster)"
//! cargo build -p dlock-faults --bins   # the runner and its worker
//! cargo run -p dlock-faults --bin dlock-faults -- --runs 3 --seconds 6 > FAULTS.md
//! ```
//!
//! Two workloads leave the runner's store for the backend's own ([`own_store`]): a
//! counter written through each backend's fence helper, judged by the history the store
//! itself keeps, and exactly-once effects behind `Idempotent::run_once`.
//! `DLOCK_FAULTS_DUMP=1` prints the history and log of an own-store run that was unsafe
//! or lost increments.
//!
//! The clock drills ([`Nemesis::CLOCKS`], [`clock`]) step the workers' and the servers'
//! time of day and run the workers' clocks slow or fast (`dlock-faults --clock`; the
//! short version is `tests/clocks.rs`).
//!
//! It lives in its own crate because it needs every adapter, while the conformance
//! crate must stay free of them (the adapters' own tests depend on it).
//!
//! ```
//! use dlock_faults::{check, store::Event};
//! assert!(check(&Vec::<Event>::new()).safe());
//! ```

pub mod backends;
pub mod checker;
pub mod clock;
pub mod cluster;
pub mod evidence;
pub mod nemesis;
pub mod own_store;
pub mod replica;
pub mod report;
pub mod run;
pub mod sentinel;
pub mod standby;
pub mod store;
pub mod workload;

pub use checker::{Verdict, check, check_as};
pub use nemesis::Nemesis;
pub use store::FencedStore;
pub use workload::{Fence, Workload};
