//! `dlock release --force NAME`: an operator breaks the holder of a lock.

use std::process::ExitCode;

use dlock_any::{LockName, ProcessHolder};

use crate::cli::ForceArgs;
use crate::{exit, holder, url};

/// Breaks the holder of `args.name`: without `--yes` only says who it would break.
pub async fn force(args: &ForceArgs) -> ExitCode {
    let name = match LockName::new(&args.name) {
        Ok(n) => n,
        Err(e) => return exit::fail(&e),
    };
    let lock = match url::connect(args.backend.url.as_deref()).await {
        Ok(l) => l,
        Err(e) => return exit::fail(&e),
    };
    if !args.yes {
        return match lock.inspect(&name).await {
            Ok(Some(h)) => {
                eprintln!(
                    "dlock: {name} is held by {} (token {}); add --yes to break it: its run stops \
                     at its next renewal (exit 75), and its writes are refused once the next \
                     holder's token is seen",
                    holder::who(&h),
                    h.token
                );
                ExitCode::from(exit::USAGE)
            }
            Ok(None) => {
                eprintln!("dlock: {name} is free; nothing to break");
                ExitCode::SUCCESS
            }
            Err(e) => exit::fail(&e),
        };
    }
    match lock.break_holder(&name).await {
        Ok(Some(h)) => {
            // who broke it, for the holder's operator and the logs
            let me = ProcessHolder::this_process("dlock release --force");
            let by = std::env::var("USER").unwrap_or_else(|_| "?".into());
            eprintln!(
                "dlock: broke the holder of {name}: {} (token {}), at the request of {by}@{} (pid {})",
                holder::who(&h),
                h.token,
                me.host,
                me.pid
            );
            ExitCode::SUCCESS
        }
        Ok(None) => {
            eprintln!("dlock: {name} is free; nothing to break");
            ExitCode::SUCCESS
        }
        Err(e) => exit::fail(&e),
    }
}
