//! # dlock
//!
//! Runs a command under a distributed lock, so a cron job on many hosts runs one at a
//! time, and shows who holds a lock:
//!
//! ```text
//! dlock run [--url URL] [--ttl 30s] [--wait 10m|forever] [--on-lost term|kill]
//!           [--max-hold D] [--min-hold D] NAME [NAME...] -- COMMAND [ARGS...]
//! dlock elect [--url URL] [--value V] [--ttl 30s] NAME -- COMMAND [ARGS...]
//! dlock leader [--url URL] [--watch] [--json] NAME
//! dlock status [--url URL] [--json] NAME...
//! dlock bench [--url URL] [--scenario uncontended,handoff,contended,parallel,held] [--json]
//! dlock acquire [--url URL] [--ttl 5m] [--wait D] NAME      # prints a ticket
//! dlock renew [--url URL] [--ttl D] TICKET
//! dlock release [--url URL] TICKET
//! dlock list [--url URL] [--json] [PREFIX]
//! dlock doctor [--url URL] [--json]
//! dlock completions bash|zsh|fish
//! dlock man
//! ```
//!
//! The backend comes from `--url`, `DLOCK_URL`, or an SQLite file in the user's state
//! directory. See `dlock run --help` for the exit codes.

mod bench;
mod bench_plot;
mod child;
mod cli;
mod docs;
mod doctor;
mod elect;
mod exit;
mod force;
mod grant;
mod holder;
mod leader;
mod list;
mod logging;
mod metrics;
mod migrate;
mod plot;
mod progress;
mod prune;
mod run;
mod status;
mod stdout;
mod supervisor;
mod ticket;
mod url;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    // the helper between dlock and a supervised command: no runtime, no clap
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == supervisor::helper::SUBCOMMAND)
    {
        return ExitCode::from(supervisor::helper::main(&args[2..]));
    }
    let parsed = cli::Cli::command()
        .long_version(cli::long_version())
        .try_get_matches()
        .and_then(|m| cli::Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            if let Some(hint) = cli::hint_for(&e, &args) {
                eprintln!("{hint}");
            }
            return if e.use_stderr() {
                ExitCode::from(exit::USAGE)
            } else {
                ExitCode::SUCCESS // --help, --version
            };
        }
    };
    logging::init(cli.verbose, cli.command.quiet());
    let command = cli.backend_filled();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dlock: cannot start the async runtime: {e}");
            return ExitCode::from(exit::BACKEND);
        }
    };
    runtime.block_on(async move {
        let code = match command {
            cli::Command::Run(args) => Box::pin(run::run(args)).await,
            cli::Command::Elect(args) => elect::elect(args).await,
            cli::Command::Leader(args) => leader::leader(args).await,
            cli::Command::Status(args) => status::status(args).await,
            cli::Command::Bench(args) => Box::pin(bench::bench(args)).await,
            cli::Command::Acquire(args) => ticket::acquire(args).await,
            cli::Command::Renew(args) => ticket::renew(args).await,
            cli::Command::Release(args) if args.force => {
                force::force(&force::ForceArgs {
                    backend: args.backend,
                    name: args.target,
                    yes: args.yes,
                    now: args.now,
                })
                .await
            }
            cli::Command::Release(args) => {
                ticket::release(cli::TicketArgs {
                    backend: args.backend,
                    ticket: args.target,
                })
                .await
            }
            cli::Command::List(args) => list::list(args).await,
            cli::Command::Doctor(args) => doctor::doctor(args).await,
            cli::Command::Prune(args) => prune::prune(args).await,
            cli::Command::Migrate(args) => migrate::migrate(args).await,
            cli::Command::Completions(args) => docs::completions(args.shell),
            cli::Command::Man(args) => docs::man(&args),
        };
        // What dropped guards and abandoned waits left behind (a queue node, a key,
        // a release) is deleted before the process ends, not cut off with it: else it
        // would block everyone behind it until its session or lease ran out.
        if !dlock_any::settle(SETTLE_LIMIT).await {
            tracing::warn!(
                "exiting with a lock clean-up unfinished; what it held ends with its TTL"
            );
        }
        code
    })
}

/// How long dlock waits on exit for its clean-ups (see `dlock_any::settle`).
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);
