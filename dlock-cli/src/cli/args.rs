//! The options of each subcommand.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::values::{duration, host_port, scenario};

/// `dlock doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Print one JSON array of findings instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `dlock completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `dlock man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (`dlock man run` is dlock-run(1)); the top
    /// page without one.
    pub subcommand: Option<String>,
    /// Write every page (dlock.1, dlock-run.1, …) into this directory instead.
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    pub out_dir: Option<std::path::PathBuf>,
}

/// The shells `dlock completions` writes for.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Shell {
    /// GNU bash.
    Bash,
    /// Z shell.
    Zsh,
    /// fish.
    Fish,
}

/// Options shared by the subcommands: the lock backend, from the global `--url`
/// (or `DLOCK_URL`), filled in after parsing ([`super::Cli::backend_filled`]).
#[derive(Clone, Debug, Default, Args)]
pub struct Backend {
    /// The URL given, if any.
    #[arg(skip)]
    pub url: Option<String>,
}

/// `dlock run`.
#[derive(Clone, Debug, Args)]
pub struct RunArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Lease time to live; renewed every third of it while the command runs.
    #[arg(long, default_value = "30s", value_parser = duration, allow_hyphen_values = true)]
    pub ttl: Duration,
    /// How long to wait for the lock: a duration (0 = give up at once) or `forever`.
    #[arg(long, default_value = "forever", value_parser = duration, allow_hyphen_values = true)]
    pub wait: Duration,
    /// What to send the command when the lease is lost.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub on_lost: OnLost,
    /// How long the command gets after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = duration, allow_hyphen_values = true)]
    pub grace: Duration,
    /// Quiet: no progress while waiting, nothing when the lock is busy or the wait runs
    /// out (the exit code says it), only errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Exit with N instead of 73 (busy, with --wait 0) or 74 (the wait ran out), as
    /// `flock -E` does: `--busy-exit 0` makes a skipped cron run a success.
    #[arg(long, value_name = "N")]
    pub busy_exit: Option<u8>,
    /// Let up to N runs hold NAME at once (a counting semaphore; every run of NAME
    /// must give the same N while any holds it).
    #[arg(long, value_name = "N", conflicts_with_all = ["shared", "exclusive"])]
    pub permits: Option<u32>,
    /// Hold NAME's read-write lock for reading: runs with --shared overlap, a run
    /// with --exclusive waits for them all (and they wait for it).
    #[arg(long, conflicts_with = "exclusive")]
    pub shared: bool,
    /// Hold NAME's read-write lock for writing: alone, with no --shared run. (A run
    /// without --permits, --shared or --exclusive uses NAME's plain lock, which only
    /// excludes other such runs.)
    #[arg(long)]
    pub exclusive: bool,
    /// Serve Prometheus metrics (acquire, renew, release, hold time and age, …) at
    /// `http://ADDR/metrics` while running, e.g. `127.0.0.1:9464` or `localhost:9464`.
    /// A port that cannot be had is a warning, not a failed job.
    #[arg(long, value_name = "ADDR", value_parser = host_port)]
    pub metrics_addr: Option<String>,
    /// Write the run's metrics to FILE for node_exporter's textfile collector (name it
    /// `*.prom` in the collector's directory): every 10 s while the lock is held, and
    /// at exit whatever the outcome, each time whole (written aside, then renamed).
    #[arg(long, value_name = "FILE")]
    pub metrics_textfile: Option<std::path::PathBuf>,
    /// Stop the command (as on a lost lease) once the lock has been held this long.
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub max_hold: Option<Duration>,
    /// Keep NAME blocked until this long after it was taken, even when the command
    /// finishes sooner (at most --ttl).
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub min_hold: Option<Duration>,
    /// With `fallback=proceed` in the URL: run the command even when the lock service
    /// is down, WITHOUT a lock (a warning on stderr each time; the command sees
    /// DLOCK_UNLOCKED=1 and DLOCK_TOKEN=0). Without this flag such a URL is refused.
    #[arg(long)]
    pub allow_unlocked: bool,
    /// The lock names, e.g. `nightly-report` or `orders/42`; several are taken as one.
    #[arg(required = true, num_args = 1.., value_name = "NAME")]
    pub names: Vec<String>,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `dlock elect`.
#[derive(Debug, Args)]
pub struct ElectArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// What this candidate tells everyone while it leads (e.g. its address); default
    /// the process (host, pid, command, start), which `dlock leader` shows.
    #[arg(long, value_name = "VALUE")]
    pub value: Option<String>,
    /// Leadership lease time to live: how long a crashed leader keeps the
    /// leadership, at most; renewed every third of it.
    #[arg(long, default_value = "30s", value_parser = duration, allow_hyphen_values = true)]
    pub ttl: Duration,
    /// What to send the command when the leadership is lost.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub on_lost: OnLost,
    /// How long the command gets after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = duration, allow_hyphen_values = true)]
    pub grace: Duration,
    /// Stand for good: when the command exits or the leadership is lost, campaign
    /// again and run the command again once leading (Curator's autoRequeue). Ends on
    /// SIGTERM, SIGINT or SIGQUIT (forwarded to a running command first); SIGHUP,
    /// SIGUSR1 and SIGUSR2 go to a running command and are ignored while standing by.
    #[arg(long)]
    pub requeue: bool,
    /// Do not report the leader while standing by.
    #[arg(long, short)]
    pub quiet: bool,
    /// The election's name.
    pub name: String,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `dlock leader`.
#[derive(Debug, Args)]
pub struct LeaderArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Keep printing: one line per change, until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Print JSON (one object per line with --watch).
    #[arg(long)]
    pub json: bool,
    /// The election's name.
    pub name: String,
}

/// The signal sent to the command when the lease is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnLost {
    /// SIGTERM, then SIGKILL after the grace period.
    Term,
    /// SIGKILL at once.
    Kill,
}

/// `dlock status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Print one JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    /// Lock names, or tickets from `dlock acquire` (does the ticket still hold?).
    #[arg(required = true, num_args = 1..)]
    pub names: Vec<String>,
}

/// `dlock acquire`.
#[derive(Debug, Args)]
pub struct AcquireArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Lease time to live (default 5m, or the backend's longest if shorter: Redlock's
    /// restart delay). Nothing renews it after `dlock acquire` exits.
    #[arg(long, value_parser = duration, allow_hyphen_values = true)]
    pub ttl: Option<Duration>,
    /// How long to wait for the lock: a duration (0 = give up at once) or `forever`.
    #[arg(long, default_value = "0", value_parser = duration, allow_hyphen_values = true)]
    pub wait: Duration,
    /// Do not report progress while waiting.
    #[arg(long, short)]
    pub quiet: bool,
    /// What `status` and `list` show as the holder's command (default: the name of the
    /// process that ran `dlock acquire`, whose pid they show).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Lock name.
    pub name: String,
}

/// `dlock renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// The ticket.
    #[command(flatten)]
    pub ticket: TicketArgs,
    /// The TTL to renew for (default: the ticket's, or more if a renewal with a longer
    /// --ttl left more: a renewal without --ttl never shortens the lease).
    #[arg(long, value_parser = duration, allow_hyphen_values = true)]
    pub ttl: Option<Duration>,
}

/// A command on one ticket.
#[derive(Debug, Args)]
pub struct TicketArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// The ticket `dlock acquire` printed; `-` reads it from stdin (keeping it out of
    /// the process list, which other users can read).
    #[arg(env = "DLOCK_TICKET")]
    pub ticket: String,
}

/// `dlock release`: a ticket's lease, or (`--force`) whoever holds a lock.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Revoke the current holder of lock NAME, whoever it is (an operator's way to
    /// stop a runaway holder): its run stops at its next renewal, and nobody else gets
    /// NAME before that lease is over. Says who holds it unless --yes.
    #[arg(long)]
    pub force: bool,
    /// With --force: do it.
    #[arg(long, requires = "force")]
    pub yes: bool,
    /// With --force: break the holder at once instead, handing NAME to the next
    /// waiter while the broken run may still be at work (for a holder known dead).
    #[arg(long, requires = "force")]
    pub now: bool,
    /// The ticket `dlock acquire` printed (`-` reads it from stdin); with --force, the
    /// lock's name.
    #[arg(env = "DLOCK_TICKET", value_name = "TICKET|NAME")]
    pub target: String,
}

/// `dlock prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Delete rows of names unheld for longer than this (at least 1s).
    #[arg(long, value_parser = duration, value_name = "DURATION", allow_hyphen_values = true)]
    pub idle_for: Duration,
}

/// `dlock migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Print the statements for the URL's database and table instead of connecting
    /// (for a reviewer, or to apply by hand).
    #[arg(long)]
    pub print: bool,
    /// With --print: also the grants ROLE needs to run with create=false (PostgreSQL
    /// role; MySQL account `app` or `'app'@'host'`).
    #[arg(long, requires = "print", value_name = "ROLE")]
    pub grant: Option<String>,
}

/// `dlock list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Print one JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    /// Only names starting with this.
    #[arg(default_value = "")]
    pub prefix: String,
}

/// `dlock bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Scenarios to run (default: all but scale): uncontended, handoff, contended,
    /// parallel, held, semaphore, rwlock (the last two where the backend offers them),
    /// election, scale (how costs grow with waiters, held locks and names; minutes).
    #[arg(long, value_delimiter = ',', value_parser = scenario)]
    pub scenario: Vec<dlock_bench::Scenario>,
    /// Length of the contended and parallel runs.
    #[arg(long, default_value = "5s", value_parser = duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Measured cycles of the uncontended scenario (plus a tenth to warm up).
    #[arg(long, default_value_t = 2000)]
    pub cycles: usize,
    /// Hand-off trials.
    #[arg(long, default_value_t = 30)]
    pub trials: usize,
    /// Clients in the contended scenario.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Tasks in the parallel scenario.
    #[arg(long, default_value_t = 64)]
    pub parallel: usize,
    /// Locks held in the held scenario.
    #[arg(long, default_value_t = 10_000)]
    pub held_locks: usize,
    /// TTL of the held locks (held for three of them).
    #[arg(long, default_value = "3s", value_parser = duration, allow_hyphen_values = true)]
    pub held_ttl: Duration,
    /// The scale scenario's most waiters on one name (it measures 1, 10, 100, 1000 up
    /// to this), spread over `--clients` clients.
    #[arg(long, default_value_t = 100)]
    pub scale_waiters: usize,
    /// The scale scenario's most held locks (it measures 1000, 10000, 100000 up to
    /// this).
    #[arg(long, default_value_t = 10_000)]
    pub scale_held: usize,
    /// Distinct names the scale scenario acquires and releases once each, to see what
    /// the server keeps per name (0: skip).
    #[arg(long, default_value_t = 10_000)]
    pub scale_names: usize,
    /// Skip the raw-protocol floor.
    #[arg(long)]
    pub no_floor: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also print the run's metrics (the same series `dlock run --metrics-addr` serves)
    /// in Prometheus text format.
    #[arg(long)]
    pub metrics: bool,
    /// Draw the run's metrics as the dashboard's panels (latency CDFs, outcome
    /// counts) in an SVG file.
    #[arg(long, value_name = "FILE")]
    pub metrics_svg: Option<std::path::PathBuf>,
    /// Draw the run's figures in an SVG file: a latency CDF per scenario (dlock and
    /// its floor) and, for the scale scenario, each cost against N.
    #[arg(long, value_name = "FILE")]
    pub plot_svg: Option<std::path::PathBuf>,
}
