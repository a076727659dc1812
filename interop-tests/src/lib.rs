//! # dlock-interop-tests
//!
//! dlock's locks shared with the locks other ecosystems already run, on the same names,
//! tested against the real clients (`tests/`):
//!
//! - **etcd** — `etcdctl lock` (etcd's `concurrency.Mutex`): dlock with `prefix=` empty
//!   uses the same layout (`<name>/<owner>`, the holder the lowest create revision);
//! - **ZooKeeper** — zookeeper-client's Curator-compatible recipe
//!   (`LockPrefix::new_curator(dir, "lock-")`, the layout of Curator's
//!   `InterProcessMutex`): dlock with `layout=curator`;
//! - **Redis** — rslock (the `SET NX PX` family: redsync, redis-py's `Lock`,
//!   node-redlock): dlock with `prefix=` empty and `layout=plain`.
//!
//! For each: their holder keeps dlock out, dlock's holder keeps theirs out, a mixed
//! queue is served in order where the recipe is a queue (etcd, ZooKeeper), and a
//! counter incremented under the lock by both loses nothing.
//!
//! ```
//! assert_eq!(dlock_interop_tests::unique("interop").len(), "interop-".len() + 16);
//! ```

/// A name no other test run uses.
#[must_use]
pub fn unique(base: &str) -> String {
    format!("{base}-{:016x}", dlock_any::random_u64())
}
