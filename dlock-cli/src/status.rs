//! `dlock status`: who holds each lock, and each name's semaphore and read-write lock.

use std::fmt::Write as _;
use std::process::ExitCode;

use dlock_any::{Access, DistributedLock, Holding, LockError, LockInfo, LockName, Ticket};

use crate::cli::StatusArgs;
use crate::{exit, holder, url};
use serde_json::{Value, json};

/// What one name looks like: its plain lock's holder, and the holders of its
/// semaphore and read-write lock (empty where the backend offers none).
struct Report {
    lock: Option<LockInfo>,
    permits: Vec<Holding>,
    rw: Vec<Holding>,
    /// For a ticket given instead of a name: whether its lease holds the lock.
    ticket_holds: Option<bool>,
}

/// A name, or a ticket standing for its name and one lease on it.
fn target(arg: &str) -> Result<(LockName, Option<Ticket>), LockError> {
    if arg.starts_with("dlock-ticket") || arg == "-" {
        let ticket = crate::ticket::ticket_of(arg)?;
        return Ok((ticket.name().clone(), Some(ticket)));
    }
    Ok((LockName::new(arg)?, None))
}

pub async fn status(args: StatusArgs) -> ExitCode {
    let targets: Result<Vec<_>, _> = args.names.iter().map(|n| target(n)).collect();
    let (names, tickets): (Vec<LockName>, Vec<Option<Ticket>>) = match targets {
        Ok(t) => t.into_iter().unzip(),
        Err(e) => return exit::fail(&e),
    };
    let backend = match url::connect(args.backend.url.as_deref()).await {
        Ok(b) => b,
        Err(e) => return exit::fail(&e),
    };
    if let Some(t) = tickets
        .iter()
        .flatten()
        .find(|t| t.backend() != backend.backend_name())
    {
        return exit::fail(&t.foreign(backend.backend_name()));
    }
    let mut reports = Vec::new();
    for (name, ticket) in names.iter().zip(&tickets) {
        match report(&*backend, name).await {
            Ok(mut r) => {
                r.ticket_holds = ticket.as_ref().map(|t| {
                    r.lock
                        .as_ref()
                        .is_some_and(|h| h.owner == *t.owner() && h.token == t.token())
                });
                reports.push(r);
            }
            Err(e) => return exit::fail(&e),
        }
    }
    let left = holder::Left::of(&*backend);
    let out = if args.json {
        as_json(&names, &reports, left)
    } else {
        as_text(&names, &reports, left)
    };
    if let Err(code) = crate::stdout::write(out.as_bytes()) {
        return code;
    }
    if reports.iter().any(|r| r.ticket_holds == Some(false)) {
        return ExitCode::from(exit::LEASE_LOST);
    }
    if reports
        .iter()
        .any(|r| r.lock.is_none() && r.permits.is_empty() && r.rw.is_empty())
    {
        return ExitCode::from(exit::FREE);
    }
    ExitCode::SUCCESS
}

async fn report(backend: &dyn DistributedLock, name: &LockName) -> Result<Report, LockError> {
    let shared = backend.capabilities().shared;
    Ok(Report {
        lock: backend.inspect(name).await?,
        permits: if shared {
            backend.holders(name, Access::Permit(1)).await?
        } else {
            Vec::new()
        },
        rw: if shared {
            backend.holders(name, Access::Read).await?
        } else {
            Vec::new()
        },
        ticket_holds: None,
    })
}

fn as_text(names: &[LockName], reports: &[Report], left: holder::Left) -> String {
    let mut out = String::new();
    for (name, r) in names.iter().zip(reports) {
        match &r.lock {
            Some(h) => {
                let _ = writeln!(
                    out,
                    "{name}: held by {} (token {}), {}",
                    holder::who(h),
                    h.token,
                    left.text(h.remaining)
                );
            }
            None => {
                let _ = writeln!(out, "{name}: free");
            }
        }
        match r.ticket_holds {
            Some(true) => {
                let _ = writeln!(out, "{name}: the ticket's lease holds it");
            }
            Some(false) => {
                let _ = writeln!(out, "{name}: the ticket's lease is gone");
            }
            None => {}
        }
        if let Some(first) = r.permits.first() {
            let n = match first.access {
                Access::Permit(n) => n.to_string(),
                _ => "?".into(),
            };
            let _ = writeln!(
                out,
                "{name} (semaphore): {} of {n} permits held: {}",
                r.permits.len(),
                holders_text(&r.permits, left)
            );
        }
        if !r.rw.is_empty() {
            let how = if r.rw.iter().any(|h| h.access == Access::Write) {
                "written".to_owned()
            } else {
                format!("read by {}", r.rw.len())
            };
            let _ = writeln!(
                out,
                "{name} (read-write): {how}: {}",
                holders_text(&r.rw, left)
            );
        }
    }
    out
}

fn holders_text(holders: &[Holding], left: holder::Left) -> String {
    holders
        .iter()
        .map(|h| {
            format!(
                "{} (token {}, {})",
                holder::who_owner(&h.owner),
                h.token,
                left.text(h.remaining)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn as_json(names: &[LockName], reports: &[Report], left: holder::Left) -> String {
    let items: Vec<Value> = names
        .iter()
        .zip(reports)
        .map(|(name, r)| {
            let mut item = json!({ "name": name.as_str(), "held": r.lock.is_some() });
            if let Some(h) = &r.lock {
                item["owner"] = json!(h.owner.as_str());
                item["token"] = json!(h.token.get());
                item["remaining_ms"] = left.json(h.remaining);
                item["holder"] = holder::json_of(h);
            }
            if let Some(holds) = r.ticket_holds {
                item["ticket_holds"] = json!(holds);
            }
            if let Some(first) = r.permits.first() {
                let n = match first.access {
                    Access::Permit(n) => n,
                    _ => 0,
                };
                item["semaphore"] =
                    json!({ "permits": n, "holders": holders_json(&r.permits, left) });
            }
            if !r.rw.is_empty() {
                item["rwlock"] = json!({ "holders": holders_json(&r.rw, left) });
            }
            item
        })
        .collect();
    format!("{}\n", Value::Array(items))
}

fn holders_json(holders: &[Holding], left: holder::Left) -> Value {
    holders
        .iter()
        .map(|h| {
            let access = match h.access {
                Access::Read => "read",
                Access::Write => "write",
                _ => "permit",
            };
            json!({
                "access": access,
                "owner": h.owner.as_str(),
                "token": h.token.get(),
                "remaining_ms": left.json(h.remaining),
                "holder": holder::json_of_owner(&h.owner),
            })
        })
        .collect()
}
