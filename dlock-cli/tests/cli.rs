//! The `dlock` binary as a user runs it: real processes, real signals, real servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::backend_url;

// The parts of this one test binary live in tests/cli/ (a crate root looks for
// `mod x;` beside itself, hence the `#[path]`s).
//
// The scenarios every backend runs; the per-backend tests below call them as
// `super::<scenario>`.
#[path = "cli/commands.rs"]
mod commands;
#[path = "cli/holders.rs"]
mod holders;
use commands::{
    exit_codes_pass_through, permits_and_shared_runs, signals_are_forwarded_and_lock_released,
    status_reports_holder,
};
use holders::{
    busy_run_exits_at_once, killed_holder_frees_within_ttl, stopped_holder_loses_lease,
    tokens_increase_across_runs,
};

// The tests that run once, not per backend.
#[path = "cli/bench.rs"]
mod bench;
#[path = "cli/standalone.rs"]
mod standalone;

const BUSY: i32 = 73;
const TIMEOUT: i32 = 74;
const LEASE_LOST: i32 = 75;
const UNAVAILABLE: i32 = 69;
const USAGE: i32 = 2;
const CANNOT_EXEC: i32 = 127;

macro_rules! per_backend {
    ($backend:ident, $url:expr) => {
        per_backend!($backend, $url, all());
    };
    ($backend:ident, $url:expr, $cfg:meta) => {
        #[cfg($cfg)]
        mod $backend {
            fn url() -> String {
                $url
            }
            #[test]
            fn busy_run_exits_at_once() {
                super::busy_run_exits_at_once(&url());
            }
            #[test]
            fn tokens_increase_across_runs() {
                super::tokens_increase_across_runs(&url());
            }
            #[test]
            fn killed_holder_frees_within_ttl() {
                super::killed_holder_frees_within_ttl(&url());
            }
            #[test]
            fn stopped_holder_loses_lease() {
                super::stopped_holder_loses_lease(&url());
            }
            #[test]
            fn status_reports_holder() {
                super::status_reports_holder(&url());
            }
            #[test]
            fn signals_are_forwarded_and_lock_released() {
                super::signals_are_forwarded_and_lock_released(&url());
            }
            #[test]
            fn exit_codes_pass_through() {
                super::exit_codes_pass_through(&url());
            }
            #[test]
            fn permits_and_shared_runs() {
                super::permits_and_shared_runs(&url());
            }
        }
    };
}

per_backend!(sqlite, super::backend_url("sqlite"));
per_backend!(postgres, super::backend_url("postgres"));
per_backend!(mariadb, super::backend_url("mariadb"));
per_backend!(redis, super::backend_url("redis"));
per_backend!(etcd, super::backend_url("etcd"), feature = "etcd");
per_backend!(
    zookeeper,
    super::backend_url("zookeeper"),
    feature = "zookeeper"
);
per_backend!(redlock, super::backend_url("redlock"));
