//! # dlock-faults
//!
//! Jepsen-style fault injection for every dlock backend. Worker processes
//! (`dlock-fault-worker`) take a lock over and over and read-modify-write a counter in
//! a [`FencedStore`] under it; a [`Nemesis`] kills, pauses or partitions a holder,
//! restarts a server or kills cluster members; the [`check`]er reads the store's log
//! (one monotonic clock) for overlapping validity windows, stale writes accepted,
//! fence rejections and lost increments; [`report::table`] prints the result.
//!
//! The short version runs in CI (`tests/faults.rs`); the long one is the
//! `dlock-faults` binary, which wrote `FAULTS.md`:
//!
//! ```text
//! eval "$(scripts/services up --cluster)"
//! cargo run -p dlock-faults --bin dlock-faults -- --runs 3 --seconds 6 > FAULTS.md
//! ```
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
pub mod nemesis;
pub mod replica;
pub mod report;
pub mod run;
pub mod store;

pub use checker::{Verdict, check};
pub use nemesis::Nemesis;
pub use store::FencedStore;
