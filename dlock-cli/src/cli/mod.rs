//! Command-line arguments.

mod args;
mod help;
mod values;

use clap::{Parser, Subcommand};

pub use args::*;
pub use help::long_version;
use help::*;
pub use values::hold_limits_refused;

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
    /// Lock backend URL: sqlite://PATH, postgres://…, mysql://…, redis://…,
    /// redlock://…, etcd://…, zk://…, memory:// (default: an SQLite file in the
    /// user's state directory).
    #[arg(long, env = "DLOCK_URL", value_name = "URL", global = true)]
    pub url: Option<String>,
}

impl Cli {
    /// The subcommand's backend options, filled from the global `--url`: given before
    /// the subcommand or after it, the same.
    pub fn backend_filled(mut self) -> Command {
        let url = self.url.take();
        if let Some(b) = self.command.backend_mut() {
            b.url = url;
        }
        self.command
    }
}

impl Command {
    /// The subcommand's backend options, where it has one.
    fn backend_mut(&mut self) -> Option<&mut Backend> {
        Some(match self {
            Self::Run(a) => &mut a.backend,
            Self::Elect(a) => &mut a.backend,
            Self::Leader(a) => &mut a.backend,
            Self::Status(a) => &mut a.backend,
            Self::Bench(a) => &mut a.backend,
            Self::Acquire(a) => &mut a.backend,
            Self::Renew(a) => &mut a.ticket.backend,
            Self::Release(a) => &mut a.backend,
            Self::List(a) => &mut a.backend,
            Self::Doctor(a) => &mut a.backend,
            Self::Prune(a) => &mut a.backend,
            Self::Migrate(a) => &mut a.backend,
            Self::Completions(_) | Self::Man(_) => return None,
        })
    }

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
    /// Release the lease a ticket from `dlock acquire` stands for; with --force, revoke
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
    /// Create or upgrade dlock's SQL tables as a role that may (then run with
    /// create=false); with --print, show the statements and the grants instead.
    #[command(after_help = MIGRATE_HELP)]
    Migrate(MigrateArgs),
    /// Print a shell completion script for bash, zsh or fish.
    #[command(after_help = COMPLETIONS_HELP)]
    Completions(CompletionsArgs),
    /// Print dlock's manual pages (roff), generated from this help.
    #[command(after_help = MAN_HELP)]
    Man(ManArgs),
}

/// A line of advice after clap's own message, where a common slip explains it: `dlock
/// run a true` (no `--`) makes `true` a second lock name and leaves no command.
pub fn hint_for(e: &clap::Error, args: &[std::ffi::OsString]) -> Option<&'static str> {
    let takes_command = args.iter().skip(1).any(|a| a == "run" || a == "elect");
    if e.kind() == clap::error::ErrorKind::MissingRequiredArgument
        && takes_command
        && !args.iter().any(|a| a == "--")
    {
        return Some(
            "dlock: put `--` between the lock names and the command: \
             dlock run NAME [NAME...] -- COMMAND [ARGS...]",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    /// Every `dlock …` call in the help's examples, as the words clap gets: from the
    /// word `dlock` to the end of its shell command (`)`, `|`, `&&`, `;`, a redirection, a quote or a
    /// comment), quotes dropped.
    fn calls(text: &str) -> Vec<Vec<String>> {
        let mut found = Vec::new();
        for line in text.lines().filter(|l| l.starts_with("  ")) {
            // a substitution that is not a dlock call (`$(hostname)`) is one word
            let mut line = line.split(" #").next().unwrap_or_default().to_owned();
            while let Some(open) = line.find("$(") {
                let Some(close) = line[open..].find(')') else {
                    break;
                };
                if line[open..open + close].contains("dlock ") {
                    break;
                }
                line.replace_range(open..=open + close, "X");
            }
            let mut rest = line.as_str();
            while let Some(at) = rest.find("dlock ") {
                let starts_word = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
                let call = &rest[at..];
                let end = ["#", ")", "|", "&&", ";", "'", ">", "<"]
                    .iter()
                    .filter_map(|stop| call.find(stop))
                    .min()
                    .unwrap_or(call.len());
                if starts_word {
                    found.push(
                        call[..end]
                            .split_whitespace()
                            .map(|w| w.trim_matches('"').to_owned())
                            .collect(),
                    );
                }
                rest = &call[end.max(1)..];
            }
        }
        found
    }

    #[test]
    fn every_example_in_the_help_parses() {
        let top = Cli::command();
        let mut checked = 0;
        for sub in top.get_subcommands() {
            let help = sub
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            for words in calls(&help) {
                // a ticket stands in for "$t"
                let words: Vec<String> = words
                    .into_iter()
                    .map(|w| {
                        if w == "$t" {
                            "dlock-ticket1:x".into()
                        } else {
                            w
                        }
                    })
                    .collect();
                let parsed = Cli::try_parse_from(&words);
                assert!(
                    parsed.is_ok(),
                    "`{}`: {}",
                    words.join(" "),
                    parsed.err().map(|e| e.to_string()).unwrap_or_default()
                );
                checked += 1;
            }
        }
        assert!(checked > 30, "only {checked} examples found");
    }
}
