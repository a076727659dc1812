//! The `dlock` binary as a user runs it: real processes, real signals, real servers.
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

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
    a_hold_counts_from_its_grant, exit_codes_pass_through, permits_and_shared_runs,
    signals_are_forwarded_and_lock_released, status_reports_holder,
};
use holders::{
    busy_run_exits_at_once, killed_holder_frees_within_ttl, stopped_holder_loses_lease,
    tokens_increase_across_runs,
};

// The tests that run once, not per backend.
#[path = "cli/bench.rs"]
mod bench;
#[path = "cli/messages.rs"]
mod messages;
#[path = "cli/standalone.rs"]
mod standalone;

const BUSY: i32 = 73;
const TIMEOUT: i32 = 74;
const LEASE_LOST: i32 = 75;
const UNAVAILABLE: i32 = 69;
const USAGE: i32 = 2;
const CANNOT_EXEC: i32 = 127;

common::every_backend!(
    busy_run_exits_at_once,
    tokens_increase_across_runs,
    killed_holder_frees_within_ttl,
    stopped_holder_loses_lease,
    status_reports_holder,
    signals_are_forwarded_and_lock_released,
    exit_codes_pass_through,
    permits_and_shared_runs,
    a_hold_counts_from_its_grant,
);
