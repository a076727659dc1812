//! `dlock leader`: who leads an election, once or as it changes.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use dlock_any::{Election, Leader};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::LeaderArgs;
use crate::elect::describe;
use crate::{exit, url};
use serde_json::{Value, json};

pub async fn leader(args: LeaderArgs) -> ExitCode {
    let backend = match url::connect(args.backend.url.as_deref()).await {
        Ok(b) => b,
        Err(e) => return exit::fail(&e),
    };
    let election = match Election::new(backend, &args.name) {
        Ok(e) => e,
        Err(e) => return exit::fail(&e),
    };
    if !args.watch {
        return match election.leader().await {
            Ok(l) => {
                let printed = print(&line(&args, l.as_ref()));
                if l.is_none() && printed == ExitCode::SUCCESS {
                    ExitCode::from(exit::FREE)
                } else {
                    printed
                }
            }
            Err(e) => exit::fail(&e),
        };
    }
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("dlock: cannot install signal handlers");
        return ExitCode::from(exit::BACKEND);
    };
    let mut changes = election.observe();
    loop {
        tokio::select! {
            r = changes.next() => match r {
                Ok(l) => {
                    let code = print(&line(&args, l.as_ref()));
                    if code != ExitCode::SUCCESS {
                        return code;
                    }
                }
                Err(e) => {
                    eprintln!("dlock: watching {}: {e}", args.name);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
            _ = term.recv() => return ExitCode::SUCCESS,
            _ = int.recv() => return ExitCode::SUCCESS,
        }
    }
}

fn line(args: &LeaderArgs, l: Option<&Leader>) -> String {
    if args.json {
        let leader = l.map(|l| {
            let process = l
                .value
                .as_deref()
                .and_then(|v| dlock_any::HolderValue::new(v).ok())
                .and_then(|v| dlock_any::ProcessHolder::from_value(&v));
            json!({
                "value": l.value,
                "epoch": l.epoch.get(),
                "holder": process.as_ref().map_or(Value::Null, crate::holder::process_json),
            })
        });
        format!("{}\n", json!({ "name": args.name, "leader": leader }))
    } else {
        match l {
            Some(l) => format!("{}: {}\n", args.name, describe(l)),
            None => format!("{}: no leader\n", args.name),
        }
    }
}

/// Writes and flushes at once (a watcher's reader is often a pipe).
fn print(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    if out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ExitCode::from(exit::BACKEND);
    }
    ExitCode::SUCCESS
}
