//! The client's etcd session: the leases its locks hang on (one per TTL, kept alive by
//! one keep-alive per renewal tick), the bookkeeping of which key lives on which lease
//! and until when, and the sweeper that deletes a key its lock no longer renews.
//!
//! - `leases`: granting, refreshing and handing out the shared leases (the RPCs);
//! - `bookkeeping`: which key is on which shared lease until when (no I/O);
//! - `sweeper`: the background task that deletes expired and stray keys.

pub(crate) mod bookkeeping;
pub(crate) mod leases;
pub(crate) mod sweeper;
