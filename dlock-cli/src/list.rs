//! `dlock list`: the held locks.

use std::fmt::Write as _;
use std::process::ExitCode;

use dlock_any::{Access, Held};
use serde_json::{Value, json};

use crate::cli::ListArgs;
use crate::{exit, holder, url};

pub async fn list(args: ListArgs) -> ExitCode {
    let lock = match url::connect(args.backend.url.as_deref()).await {
        Ok(l) => l,
        Err(e) => return exit::fail(&e),
    };
    let held = match lock.list(&args.prefix).await {
        Ok(h) => h,
        Err(e) => return exit::fail(&e),
    };
    if held.is_empty() && !args.json {
        // said on stderr: stdout stays empty for a script counting lines
        if args.prefix.is_empty() {
            eprintln!("dlock: no locks held");
        } else {
            eprintln!("dlock: no locks held under {:?}", args.prefix);
        }
    }
    let left = holder::Left::of(&*lock);
    let out = if args.json {
        as_json(&held, left)
    } else {
        as_text(&held, left)
    };
    if let Err(code) = crate::stdout::write(out.as_bytes()) {
        return code;
    }
    ExitCode::SUCCESS
}

fn as_text(held: &[Held], left: holder::Left) -> String {
    let mut out = String::new();
    if held.is_empty() {
        return out;
    }
    let rows: Vec<[String; 7]> = held
        .iter()
        .map(|h| {
            [
                h.name.as_str().to_owned(),
                kind_cell(h.access),
                holder::who_short(&h.holder),
                holder::age_cell(&h.holder),
                h.holder.token.to_string(),
                left.cell(h.holder.remaining),
                h.waiters.map_or_else(|| "-".to_owned(), |w| w.to_string()),
            ]
        })
        .collect();
    let header = [
        "NAME", "KIND", "HOLDER", "HELD FOR", "TOKEN", "LEFT", "WAITERS",
    ]
    .map(str::to_owned);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

fn as_json(held: &[Held], left: holder::Left) -> String {
    let items: Vec<Value> = held
        .iter()
        .map(|h| {
            json!({
                "name": h.name.as_str(),
                "owner": h.holder.owner.as_str(),
                "token": h.holder.token.get(),
                "remaining_ms": left.json(h.holder.remaining),
                "waiters": h.waiters,
                "holder": holder::json_of(&h.holder),
                "access": access_word(h.access),
                "permits": match h.access {
                    Access::Permit(n) => Some(n),
                    _ => None,
                },
            })
        })
        .collect();
    format!("{}\n", Value::Array(items))
}

/// How a lock is held, in the words of `dlock run`'s flags.
fn access_word(access: Access) -> &'static str {
    match access {
        Access::Permit(_) => "permit",
        Access::Read => "shared",
        Access::Write => "exclusive",
        // the plain lock (Exclusive), and any kind a later version adds
        _ => "mutex",
    }
}

/// The KIND cell: a semaphore's with its permit count.
fn kind_cell(access: Access) -> String {
    match access {
        Access::Permit(n) => format!("permit of {n}"),
        other => access_word(other).to_owned(),
    }
}
