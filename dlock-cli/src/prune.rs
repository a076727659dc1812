//! `dlock prune`: deletes the rows of SQL names unheld for longer than `--idle-for`.

use std::process::ExitCode;

use dlock_any::{LockError, format_duration};

use crate::cli::PruneArgs;
use crate::{exit, url};

pub async fn prune(args: PruneArgs) -> ExitCode {
    let url = match url::resolve(args.backend.url.as_deref()) {
        Ok(u) => u,
        Err(e) => return exit::fail(&e),
    };
    match run(&url, &args).await {
        Ok(line) => match crate::stdout::write(line.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(code) => code,
        },
        Err(e) => exit::fail(&e),
    }
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn run(url: &str, args: &PruneArgs) -> Result<String, LockError> {
    let scheme = url.split(':').next().unwrap_or_default();
    if !matches!(
        scheme,
        "sqlite" | "postgres" | "postgresql" | "mysql" | "mariadb"
    ) {
        return Err(not_sql(scheme));
    }
    dlock_any::check_credentials(url)?;
    let filled = dlock_any::with_password(url)?;
    let url = filled.as_str();
    let locks = dlock_any::SqlLock::connect(url)
        .await
        .map_err(|e| dlock_any::explain_tls(dlock_any::hide_password(e, url)))?;
    eprintln!(
        "dlock: deleting rows unheld for more than {}…",
        format_duration(args.idle_for)
    );
    let p = locks.prune(args.idle_for).await?;
    Ok(format!(
        "deleted {} lock rows, {} semaphore and read-write lock rows, {} expired holders, \
         {} entries of vanished waiters\n",
        p.locks, p.shared, p.holders, p.queued
    ))
}

#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
async fn run(url: &str, _args: &PruneArgs) -> Result<String, LockError> {
    Err(not_sql(url.split(':').next().unwrap_or_default()))
}

fn not_sql(scheme: &str) -> LockError {
    LockError::Config(format!(
        "dlock prune cleans SQL tables (sqlite, postgres, mysql), not {scheme}: etcd keeps \
         no key per name (compact its history with --auto-compaction-retention), ZooKeeper \
         deletes empty container nodes itself, and Redis fencing counters expire on their \
         own (see BENCHMARKS.md, What grows with distinct names)"
    ))
}
