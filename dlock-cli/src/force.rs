//! `dlock release --force NAME`: an operator revokes (or, with `--now`, breaks) the
//! holder of a lock.

use std::process::ExitCode;

use dlock_any::{LockError, LockInfo, LockName, ProcessHolder};

use crate::cli::Backend;
use crate::{exit, holder, url};

/// `dlock release --force`, as the code that revokes a holder takes it.
#[derive(Debug)]
pub struct ForceArgs {
    /// Backend URL.
    pub backend: Backend,
    /// The lock.
    pub name: String,
    /// Confirmed.
    pub yes: bool,
    /// Break at once instead of revoking.
    pub now: bool,
}

/// Revokes (or breaks) the holder of `args.name`: without `--yes` only says who it
/// would stop.
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
                let what = if args.now {
                    "break it at once: NAME goes to the next waiter while its run may still be \
                     at work, until its next renewal"
                } else {
                    "revoke it: its run stops at its next renewal (exit 75), and nobody else \
                     gets NAME before that lease is over"
                };
                eprintln!(
                    "dlock: {name} is held by {} (token {}); add --yes to {}",
                    holder::who(&h),
                    h.token,
                    what.replace("NAME", name.as_str())
                );
                ExitCode::from(exit::USAGE)
            }
            Ok(None) => {
                eprintln!("dlock: {name} is free; nothing to {}", verb(args.now));
                ExitCode::SUCCESS
            }
            Err(e) => exit::fail(&e),
        };
    }
    let done = if args.now {
        lock.break_holder(&name).await
    } else {
        lock.revoke_holder(&name).await
    };
    match done {
        Ok(Some(h)) => {
            said(&name, &h, args.now, holder::Left::of(&*lock));
            ExitCode::SUCCESS
        }
        Ok(None) => {
            eprintln!("dlock: {name} is free; nothing to {}", verb(args.now));
            ExitCode::SUCCESS
        }
        Err(e @ LockError::Unsupported { .. }) if !args.now => {
            eprintln!("dlock: {e}; `release --force --now` breaks the holder at once instead");
            ExitCode::from(exit::USAGE)
        }
        Err(e) => exit::fail(&e),
    }
}

fn verb(now: bool) -> &'static str {
    if now { "break" } else { "revoke" }
}

/// Who was stopped, by whom, and what happens next: for the holder's operator and the
/// logs.
fn said(name: &LockName, h: &LockInfo, now: bool, left: holder::Left) {
    let me = ProcessHolder::this_process("dlock release --force");
    let by = std::env::var("USER").unwrap_or_else(|_| "?".into());
    let next = if now {
        "the next waiter gets it now, with a higher token".to_owned()
    } else if h.owner.is_revoked() {
        "it was revoked already; nobody else gets it before that lease is over".to_owned()
    } else {
        format!(
            "its run stops at its next renewal (exit 75); nobody else gets {name} before that \
             lease is over ({})",
            left.text(h.remaining)
        )
    };
    eprintln!(
        "dlock: {} the holder of {name}: {} (token {}), at the request of {by}@{} (pid {}); {next}",
        if now { "broke" } else { "revoked" },
        holder::who(h),
        h.token,
        me.host,
        me.pid
    );
}
