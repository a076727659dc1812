//! `dlock list`: the held locks.

use std::fmt::Write as _;
use std::process::ExitCode;

use dlock_any::{Held, format_duration};

use crate::cli::ListArgs;
use crate::{exit, json, url};

pub async fn list(args: ListArgs) -> ExitCode {
    let lock = match url::resolve(args.backend.url.as_deref()) {
        Ok(u) => match dlock_any::connect(&u).await {
            Ok(l) => l,
            Err(e) => return exit::fail(&e),
        },
        Err(e) => return exit::fail(&e),
    };
    let held = match lock.list(&args.prefix).await {
        Ok(h) => h,
        Err(e) => return exit::fail(&e),
    };
    let out = if args.json {
        as_json(&held)
    } else {
        as_text(&held)
    };
    if let Err(code) = crate::stdout::write(out.as_bytes()) {
        return code;
    }
    ExitCode::SUCCESS
}

fn as_text(held: &[Held]) -> String {
    let mut out = String::new();
    if held.is_empty() {
        return out;
    }
    let rows: Vec<[String; 5]> = held
        .iter()
        .map(|h| {
            [
                h.name.as_str().to_owned(),
                short(h.holder.owner.as_str()).to_owned(),
                h.holder.token.to_string(),
                format_duration(h.holder.remaining),
                h.waiters.map_or_else(|| "-".to_owned(), |w| w.to_string()),
            ]
        })
        .collect();
    let header = ["NAME", "HOLDER", "TOKEN", "LEFT", "WAITERS"].map(str::to_owned);
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

/// An owner id's first 8 characters: enough to tell holders apart at a glance.
fn short(owner: &str) -> &str {
    owner.get(..8).unwrap_or(owner)
}

fn as_json(held: &[Held]) -> String {
    let items: Vec<String> = held
        .iter()
        .map(|h| {
            format!(
                "{{\"name\":{},\"owner\":{},\"token\":{},\"remaining_ms\":{},\"waiters\":{}}}",
                json::string(h.name.as_str()),
                json::string(h.holder.owner.as_str()),
                h.holder.token,
                h.holder.remaining.as_millis(),
                h.waiters
                    .map_or_else(|| "null".to_owned(), |w| w.to_string()),
            )
        })
        .collect();
    format!("[{}]\n", items.join(","))
}
