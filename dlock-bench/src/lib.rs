//! # dlock-bench
//!
//! What `dlock bench` measures, as a library: the five [`scenarios`] on any
//! [`DistributedLock`](dlock_any::DistributedLock), the raw-protocol [`floor`]s they are
//! compared with (the same job with the fewest server commands, on the client crates the
//! adapters use), the server's own request counts ([`server_requests`]), the
//! [`stats`], and [`run`](run()) which interleaves ours and the floor's in one run (and,
//! on PostgreSQL, a [`peer`]'s: advisory locks). The
//! `dlock` binary prints what it returns; the peer comparison (`bench-peers`) runs the
//! same scenarios against other lock clients.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_any::LockError> {
//! let lock = dlock_any::MemoryLock::new();
//! let cycles = dlock_bench::scenarios::uncontended(&lock, 100).await?;
//! assert_eq!(cycles.len(), 100);
//!
//! let options = dlock_bench::Options {
//!     scenarios: vec![dlock_bench::Scenario::Uncontended],
//!     cycles: 30,
//!     ..Default::default()
//! };
//! let report = dlock_bench::run("memory://", &options).await?;
//! assert_eq!(report.backend, "memory");
//! # Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod election_runs;
pub mod floor;
mod floor_runs;
pub mod floor_wait;
pub mod footprint;
pub mod peer;
pub(crate) mod process;
mod report;
mod run;
pub mod scale;
mod scale_runs;
pub mod scenarios;
pub mod scratch;
pub mod server_requests;
pub mod shared_runs;
pub mod stats;
mod url_parts;
mod wait_runs;

pub use report::{CDF_POINTS, Distribution, Figure, Options, Report, Scenario, Step};
pub use run::{run, run_with_progress};
