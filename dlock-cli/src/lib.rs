//! # dlock-cli (library part)
//!
//! The `dlock` binary lives in this package; this library only exposes the benchmark
//! scenarios of `dlock bench`, so the peer benchmarks (`bench-peers`) run exactly the
//! same code against other lock clients wrapped in the
//! [`DistributedLock`](dlock_any::DistributedLock) trait.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_any::LockError> {
//! let lock = dlock_any::MemoryLock::new();
//! let cycles = dlock_cli::scenarios::uncontended(&lock, 100).await?;
//! assert_eq!(cycles.len(), 100);
//! # Ok(()) }
//! ```

pub mod scenarios;
pub mod stats;
