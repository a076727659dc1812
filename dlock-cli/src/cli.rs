//! Command-line arguments.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Runs commands under distributed locks, and shows who holds them.
#[derive(Debug, Parser)]
#[command(name = "dlock", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// More log lines on stderr: -v info, -vv debug, -vvv trace (RUST_LOG overrides).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

impl Command {
    /// Whether the subcommand was asked to be quiet (`-q`: errors only).
    pub fn quiet(&self) -> bool {
        match self {
            Self::Run(a) => a.quiet,
            Self::Elect(a) => a.quiet,
            Self::Acquire(a) => a.quiet,
            _ => false,
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run COMMAND while holding lock NAME (or every NAME given, as one); release
    /// when COMMAND exits.
    #[command(after_help = RUN_HELP)]
    Run(RunArgs),
    /// Run COMMAND only while leading election NAME: standbys wait, and one takes
    /// over within the TTL when the leader goes.
    #[command(after_help = ELECT_HELP)]
    Elect(ElectArgs),
    /// Print the leader of election NAME and its epoch; with --watch, every change.
    #[command(after_help = LEADER_HELP)]
    Leader(LeaderArgs),
    /// Show who holds each NAME (owner, fencing token, time left) or that it is free,
    /// and the holders of NAME's semaphore and read-write lock when there are any.
    #[command(after_help = STATUS_HELP)]
    Status(StatusArgs),
    /// Measure a backend: uncontended cycle, hand-off, contention, parallel names,
    /// many held locks; with the raw-protocol floor and the ratio where one exists.
    #[command(after_help = BENCH_HELP)]
    Bench(BenchArgs),
    /// Take lock NAME, print a ticket for the lease and exit holding it: nothing
    /// renews it until `dlock renew TICKET`, and it ends at `dlock release TICKET` or
    /// after --ttl.
    #[command(after_help = TICKET_HELP)]
    Acquire(AcquireArgs),
    /// Renew the lease a ticket from `dlock acquire` stands for.
    #[command(after_help = TICKET_HELP)]
    Renew(RenewArgs),
    /// Release the lease a ticket from `dlock acquire` stands for; with --force, break
    /// whoever holds lock NAME.
    #[command(after_help = RELEASE_HELP)]
    Release(ReleaseArgs),
    /// List the held locks: name, holder, fencing token, time left, and how many wait
    /// where the backend can tell.
    #[command(after_help = LIST_HELP)]
    List(ListArgs),
    /// Check what decides whether locking on the backend is safe and fast: server
    /// version, round trip, clock offset, durability, eviction, cluster health.
    #[command(after_help = DOCTOR_HELP)]
    Doctor(DoctorArgs),
    /// Delete the rows SQL backends keep for names unheld for longer than --idle-for
    /// (each name's row carries its fencing token, so release never deletes it).
    #[command(after_help = PRUNE_HELP)]
    Prune(PruneArgs),
    /// Print a shell completion script for bash, zsh or fish.
    #[command(after_help = COMPLETIONS_HELP)]
    Completions(CompletionsArgs),
    /// Print dlock's manual page (roff), generated from this help.
    #[command(after_help = MAN_HELP)]
    Man,
}

const DOCTOR_HELP: &str = "\
Each finding has a severity — info, warning (a guarantee is weaker than it could be), \
CRITICAL (a guarantee is broken: a lock can be held twice, a token can repeat, or \
nothing can be locked) — and one sentence of advice. Checked per backend: Redis (and \
each Redlock node) version, clock offset, replication role, maxmemory-policy, \
appendonly/appendfsync, and the spread of Redlock's clocks; PostgreSQL version, clock, \
role, synchronous_commit, standbys, whether LISTEN/NOTIFY reaches dlock (not behind a \
transaction pooler); MariaDB/MySQL version, clock, read_only, \
innodb_flush_log_at_trx_commit; SQLite version, journal mode, filesystem (a network \
filesystem is critical); every SQL database's lock table and its columns; etcd version, leader, members, alarms; ZooKeeper each \
server's version and mode, session-timeout bounds and the timeout granted.

Exit codes: 0 nothing critical; 78 a critical finding; 69 backend unreachable; \
70 backend error; 2 bad URL.

Examples:
  dlock doctor --url redis://cache:6379
  dlock doctor --url postgres://app@db/app --json | jq '.[] | select(.severity != \"info\")'";

const LEADER_HELP: &str = "\
Examples:
  dlock leader scheduler                 # LEADER EPOCH, or nothing when none leads
  dlock leader --json scheduler
  dlock leader --watch scheduler         # one line per change, until interrupted";

const STATUS_HELP: &str = "\
Exit codes: 0; 75 when a ticket given is no longer held; 2 bad name or ticket; \
69 backend unreachable.

Examples:
  dlock status nightly-report invoices
  dlock status --json nightly-report
  dlock status \"$t\"                      # a ticket from dlock acquire: does it hold?";

const BENCH_HELP: &str = "\
Examples:
  dlock bench                                    # the default SQLite file
  dlock bench --url redis://127.0.0.1:6379 --scenario uncontended,handoff
  dlock bench --url postgres://app@db/app --json --metrics";

const COMPLETIONS_HELP: &str = "\
Examples:
  dlock completions bash > ~/.local/share/bash-completion/completions/dlock
  dlock completions zsh > \"${fpath[1]}/_dlock\"
  dlock completions fish > ~/.config/fish/completions/dlock.fish";

const MAN_HELP: &str = "\
Examples:
  dlock man | man -l -
  dlock man > /usr/local/share/man/man1/dlock.1";

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

/// What `--version` prints: the version and the backends compiled in.
pub fn long_version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let backends: Vec<&str> = [
            ("sqlite", cfg!(feature = "sqlite")),
            ("postgres", cfg!(feature = "postgres")),
            ("mysql", cfg!(feature = "mysql")),
            ("redis redlock", cfg!(feature = "redis")),
            ("etcd", cfg!(feature = "etcd")),
            ("zookeeper", cfg!(feature = "zookeeper")),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .chain(["memory"])
        .collect();
        format!(
            "{}\nbackends: {}",
            env!("CARGO_PKG_VERSION"),
            backends.join(" ")
        )
    })
}

const TICKET_HELP: &str = "\
A ticket is one line: the backend's name, the lock name, the acquisition's owner id \
(128 random bits), the fencing token and the TTL. It grants renewing and releasing \
that one lease while it lasts — keep it like a password — and holds no URL or \
password: each command connects with its own --url / DLOCK_URL. SQL databases, Redis \
and Redlock take tickets; on etcd and ZooKeeper a lease cannot outlive the process \
that took it.

Exit codes: 0 done; 73 busy (--wait 0); 74 the wait ran out; 75 the ticket's lease is \
gone (expired, released, taken over); 2 not a ticket, or one for another backend; \
69 backend unreachable; 70 backend error.

`dlock renew` prints the ticket again (with the TTL given by --ttl, if any). Pass a \
ticket as an argument, in $DLOCK_TICKET, or as `-` on stdin: the process list (ps) \
shows arguments to every user of the host.

Examples:
  t=$(dlock acquire --ttl 10m deploy)     # exits holding the lock
  ./step-one && dlock renew \"$t\" && ./step-two
  dlock release \"$t\"
  dlock status \"$t\"                       # does it still hold?";

const PRUNE_HELP: &str = "\
A name taken again after its row was deleted starts from the database clock in \
microseconds, above every token it had, as long as the database clock never steps back \
by more than --idle-for: pick a day or more. Safe while locks are in use; held names \
are never deleted. Deletes in batches of 1000 rows. Every client of the table must run \
a dlock with prune first (an older one starts a recreated name at token 1).

Examples:
  dlock prune --url postgres://dlock@db/app --idle-for 7d
  DLOCK_URL=sqlite:///var/lib/dlock/locks.db dlock prune --idle-for 30d
";

const LIST_HELP: &str = "\
Waiters are counted on etcd and ZooKeeper (the queue behind the holder); on SQL and \
Redis waiters poll or listen and leave no trace, so the column shows -. Redis keys in \
the plain layout cannot be listed (they look like any other program's keys).

Examples:
  dlock list                    # every held lock
  dlock list jobs/              # names starting with jobs/
  dlock list --json | jq '.[] | select(.remaining_ms < 5000)'";

const RUN_HELP: &str = "\
The command gets DLOCK_NAME, DLOCK_TOKEN (the fencing token: pass it with every write \
so the store can reject a stale holder) and DLOCK_OWNER in its environment. The lease \
is renewed every ttl/3 while it runs.

The command runs in a process group of its own, under a small supervisor: every stop \
goes to the whole group. If the lease is lost, the group gets SIGTERM (or SIGKILL with \
--on-lost kill), then SIGKILL after --grace. If renewals keep failing, the supervisor \
stops the group before the lease runs out (SIGTERM a quarter TTL, at most --grace, \
before; SIGKILL at the end), even while dlock is stopped. If dlock dies (even by \
SIGKILL), the supervisor stops the group the same way. SIGTERM, SIGINT, SIGHUP, \
SIGQUIT, SIGUSR1 and SIGUSR2 sent to dlock are forwarded to the group. When the \
command exits, whatever it left running in its group is stopped before the lock is \
released. A process that leaves the group on purpose (setsid, a daemon's double fork) \
escapes all of this: run such programs in the foreground.

With --permits N, up to N runs hold NAME at once; with --shared and --exclusive, \
runs share NAME's read-write lock (readers together, a writer alone; a waiting writer \
keeps new readers out). These are separate from NAME's plain lock.

With several NAMEs, all are taken as one, in sorted order (so two runs with \
overlapping names never deadlock), and all are released if one cannot be had; \
DLOCK_NAMES and DLOCK_TOKENS list them, one per line (DLOCK_NAME and DLOCK_TOKEN are \
the first).

--max-hold caps the hold: the command is stopped when it is reached. --min-hold keeps \
NAME blocked until that long after it was taken even if the command finishes sooner \
(a lock-delay, kept by the server: a run that exits or crashes cannot shorten it); it \
must not exceed --ttl.

Exit status: the command's own (128+N if killed by signal N); 73 lock busy (--wait 0); \
74 wait timed out; 75 lease lost while running; 76 --max-hold reached; 69 backend \
unreachable; 70 backend error; 2 bad usage or URL (also: --permits N while NAME's holders use another N, or a \
backend without semaphores and read-write locks); 127 command could not be started.

Backend: --url, else $DLOCK_URL, else an SQLite file in $XDG_STATE_HOME/dlock \
(~/.local/state/dlock). Examples:
  dlock run nightly-report -- ./report.sh
  dlock run --wait 0 --ttl 1m backup -- pg_dump app
  DLOCK_URL=postgres://app@db/app dlock run --wait 10m invoices -- ./charge.sh
  dlock run --metrics-addr 127.0.0.1:9464 reindex -- ./reindex.sh   # scrape /metrics
  dlock run --permits 3 --wait 5m heavy-export -- ./export.sh        # 3 at a time
  dlock run --shared catalog -- ./read-catalog.sh
  dlock run --exclusive catalog -- ./rebuild-catalog.sh
  dlock run accounts/7 accounts/9 -- ./transfer.sh 7 9            # both, as one
  dlock run --min-hold 5m --max-hold 1h nightly -- ./nightly.sh";

const ELECT_HELP: &str = "\
Every host runs the same `dlock elect NAME -- COMMAND`; one leads and runs COMMAND, the \
others stand by (printing the current leader) and one takes over within --ttl when \
the leader exits, crashes or is cut off. The command gets DLOCK_NAME, DLOCK_EPOCH and \
DLOCK_TOKEN (the leadership's fencing token: strictly increasing from one leader to \
the next), DLOCK_VALUE and DLOCK_OWNER. If the leadership is lost, the command is \
stopped as in `dlock run`. When COMMAND exits, dlock resigns and exits with its status.

Examples:
  dlock elect --value \"$(hostname):8080\" scheduler -- ./scheduler
  dlock leader scheduler            # who leads now
  dlock leader --watch scheduler    # every change, one line each";

/// Options shared by the subcommands.
#[derive(Clone, Debug, Args)]
pub struct Backend {
    /// Lock backend URL: sqlite://PATH, postgres://…, mysql://…, memory://.
    #[arg(long, env = "DLOCK_URL", value_name = "URL")]
    pub url: Option<String>,
}

/// `dlock run`.
#[derive(Clone, Debug, Args)]
pub struct RunArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Lease time to live; renewed every third of it while the command runs.
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub ttl: Duration,
    /// How long to wait for the lock: a duration (0 = give up at once) or `forever`.
    #[arg(long, default_value = "forever", value_parser = duration)]
    pub wait: Duration,
    /// What to send the command when the lease is lost.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub on_lost: OnLost,
    /// How long the command gets after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = duration)]
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
    /// `http://ADDR/metrics` while running, e.g. `127.0.0.1:9464`. A port that cannot
    /// be had is a warning, not a failed job.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Write the run's metrics to FILE for node_exporter's textfile collector (name it
    /// `*.prom` in the collector's directory): every 10 s while the lock is held, and
    /// at exit whatever the outcome, each time whole (written aside, then renamed).
    #[arg(long, value_name = "FILE")]
    pub metrics_textfile: Option<std::path::PathBuf>,
    /// Stop the command (as on a lost lease) once the lock has been held this long.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub max_hold: Option<Duration>,
    /// Keep NAME blocked until this long after it was taken, even when the command
    /// finishes sooner (at most --ttl).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
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
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub ttl: Duration,
    /// What to send the command when the leadership is lost.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub on_lost: OnLost,
    /// How long the command gets after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub grace: Duration,
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
    /// Lease time to live. Nothing renews it after `dlock acquire` exits.
    #[arg(long, default_value = "5m", value_parser = duration)]
    pub ttl: Duration,
    /// How long to wait for the lock: a duration (0 = give up at once) or `forever`.
    #[arg(long, default_value = "0", value_parser = duration)]
    pub wait: Duration,
    /// Do not report progress while waiting.
    #[arg(long, short)]
    pub quiet: bool,
    /// Lock name.
    pub name: String,
}

/// `dlock renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// The ticket.
    #[command(flatten)]
    pub ticket: TicketArgs,
    /// The TTL to renew for (default: the ticket's).
    #[arg(long, value_parser = duration)]
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
    /// Break the current holder of lock NAME, whoever it is (an operator's last
    /// resort for a stuck or runaway holder): its run stops at its next renewal and
    /// the next holder's token is higher. Says who it would break unless --yes.
    #[arg(long)]
    pub force: bool,
    /// With --force: do it.
    #[arg(long, requires = "force")]
    pub yes: bool,
    /// The ticket `dlock acquire` printed (`-` reads it from stdin); with --force, the
    /// lock's name.
    #[arg(env = "DLOCK_TICKET", value_name = "TICKET|NAME")]
    pub target: String,
}

/// `dlock release --force`, as the code that breaks a holder takes it.
#[derive(Debug)]
pub struct ForceArgs {
    /// Backend URL.
    pub backend: Backend,
    /// The lock.
    pub name: String,
    /// Confirmed.
    pub yes: bool,
}

const RELEASE_HELP: &str = "\
dlock release TICKET releases the lease a ticket from `dlock acquire` stands for (see \
`dlock acquire --help`).

dlock release --force NAME breaks whoever holds lock NAME, on every backend: its lease \
is removed on the server as its own release would remove it, the next waiter gets the \
lock with a higher fencing token, the broken holder's renewals fail — its `dlock run` \
stops its command and exits 75 — and its writes are refused by a fenced store once the \
next holder's token has been seen there. Without --yes it only says who holds the lock. \
The holder is named on stderr, with who broke it.

Exit codes: 0 done (or nothing held); 2 not confirmed, not a ticket; 75 the ticket's \
lease is gone; 69 backend unreachable; 70 backend error.

Examples:
  dlock release \"$t\"
  dlock status nightly-report             # who holds it, for how long
  dlock release --force nightly-report    # says who it would break
  dlock release --force --yes nightly-report";

/// `dlock prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Backend URL.
    #[command(flatten)]
    pub backend: Backend,
    /// Delete rows of names unheld for longer than this (at least 1s).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub idle_for: Duration,
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

fn scenario(text: &str) -> Result<dlock_bench::Scenario, String> {
    text.parse()
}

fn duration(text: &str) -> Result<Duration, String> {
    dlock_any::parse_duration(text).map_err(|e| e.to_string())
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
    #[arg(long, default_value = "5s", value_parser = duration)]
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
    #[arg(long, default_value = "3s", value_parser = duration)]
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
