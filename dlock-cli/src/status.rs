//! `dlock status`: who holds each lock.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use dlock_any::{LockName, format_duration};

use crate::cli::StatusArgs;
use crate::{exit, json, url};

pub async fn status(args: StatusArgs) -> ExitCode {
    let names: Result<Vec<LockName>, _> = args.names.iter().map(|n| LockName::new(n)).collect();
    let names = match names {
        Ok(n) => n,
        Err(e) => return exit::fail(&e),
    };
    let backend = match url::resolve(args.backend.url.as_deref()) {
        Ok(u) => match dlock_any::connect(&u).await {
            Ok(b) => b,
            Err(e) => return exit::fail(&e),
        },
        Err(e) => return exit::fail(&e),
    };
    let mut out = String::new();
    if args.json {
        out.push('[');
    }
    for (i, name) in names.iter().enumerate() {
        let info = match backend.inspect(name).await {
            Ok(i) => i,
            Err(e) => return exit::fail(&e),
        };
        if args.json {
            if i > 0 {
                out.push(',');
            }
            match &info {
                Some(h) => {
                    let _ = write!(
                        out,
                        "{{\"name\":{},\"held\":true,\"owner\":{},\"token\":{},\"remaining_ms\":{}}}",
                        json::string(name.as_str()),
                        json::string(h.owner.as_str()),
                        h.token,
                        h.remaining.as_millis()
                    );
                }
                None => {
                    let _ = write!(
                        out,
                        "{{\"name\":{},\"held\":false}}",
                        json::string(name.as_str())
                    );
                }
            }
        } else {
            match &info {
                Some(h) => {
                    let _ = writeln!(
                        out,
                        "{name}: held by {} (token {}), {} left",
                        h.owner,
                        h.token,
                        format_duration(h.remaining)
                    );
                }
                None => {
                    let _ = writeln!(out, "{name}: free");
                }
            }
        }
    }
    if args.json {
        out.push_str("]\n");
    }
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::from(exit::BACKEND);
    }
    ExitCode::SUCCESS
}
