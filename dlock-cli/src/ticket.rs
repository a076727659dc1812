//! `dlock acquire`, `dlock renew`, `dlock release`: a lock held across shell commands,
//! carried from one to the next by a ticket.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use dlock_any::{
    DistributedLock, Lease, LockError, LockName, ProcessHolder, Ticket, format_duration,
};

use crate::cli::{AcquireArgs, Backend, RenewArgs, TicketArgs};
use crate::{exit, progress, url};

async fn connect(backend: &Backend) -> Result<Arc<dyn DistributedLock>, ExitCode> {
    let url = url::resolve(backend.url.as_deref())
        .and_then(|u| url::no_fallback(&u, "a ticket").map(|()| u))
        .map_err(|e| exit::fail(&e))?;
    dlock_any::connect(&url).await.map_err(|e| exit::fail(&e))
}

fn quietly(quiet: bool) -> exit::Skipped {
    exit::Skipped { quiet, code: None }
}

/// Prints `line` on stdout; `false` when stdout is gone.
fn print(line: &str) -> bool {
    crate::stdout::write(format!("{line}\n").as_bytes()).is_ok()
}

pub async fn acquire(args: AcquireArgs) -> ExitCode {
    let name = match LockName::new(&args.name) {
        Ok(n) => n,
        Err(e) => return exit::fail(&e),
    };
    let lock = match connect(&args.backend).await {
        Ok(l) => l,
        Err(code) => return code,
    };
    // the TTL asked for, else five minutes or the longest the backend takes
    let ttl = args.ttl.unwrap_or_else(|| {
        let default = Duration::from_secs(300);
        lock.capabilities()
            .max_ttl
            .map_or(default, |max| default.min(max))
    });
    // the ticket must be writable before the lock is taken: a backend whose leases
    // cannot leave this process refuses up front, holding nothing
    let probe = Ticket::new(
        lock.backend_name(),
        name.clone(),
        dlock_any::OwnerId::from_stored("probe"),
        dlock_any::FencingToken::new(0),
        ttl,
    );
    match lock.resume(&probe).await {
        Err(LockError::LeaseLost { .. }) => {}
        Err(e) => return exit::fail(&e),
        Ok(_) => return exit::fail(&LockError::backend_msg("a probe ticket resumed a lease")),
    }
    let value = match holder_of_ticket(args.label.as_deref()).to_value() {
        Ok(v) => v,
        Err(e) => return exit::fail(&e),
    };
    let lease = match take(&lock, &name, ttl, &args, &value).await {
        Ok(l) => l,
        Err(code) => return code,
    };
    // handed over, not only written down: on etcd the key leaves this process's
    // lease, which ends when it exits
    let ticket = match lock.hand_over(&lease).await {
        Ok(t) => t,
        Err(e) => {
            let _ = lock.release(&lease).await;
            return exit::fail(&e);
        }
    };
    if !print(&ticket.to_string()) {
        // nobody will ever see the ticket: give the lock back rather than strand it
        // (through the ticket: the lease handed over is the ticket's now)
        if let Ok(taken) = lock.resume(&ticket).await {
            let _ = lock.release(&taken).await;
        }
        return ExitCode::from(exit::BACKEND);
    }
    ExitCode::SUCCESS
}

/// Who holds a ticket's lock, for `status` and `list`: the process that ran `dlock
/// acquire` (a script, whose steps hold the lock; `dlock acquire` itself exits at
/// once), named by `label` if given, else by its own name.
fn holder_of_ticket(label: Option<&str>) -> ProcessHolder {
    let parent = std::os::unix::process::parent_id();
    let command = label.map_or_else(
        || {
            std::fs::read_to_string(format!("/proc/{parent}/comm"))
                .map(|c| c.trim().to_owned())
                .ok()
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| "dlock acquire".to_owned())
        },
        str::to_owned,
    );
    let mut holder = ProcessHolder::this_process(&command);
    holder.pid = parent;
    holder
}

async fn take(
    lock: &Arc<dyn DistributedLock>,
    name: &LockName,
    ttl: Duration,
    args: &AcquireArgs,
    value: &dlock_any::HolderValue,
) -> Result<Lease, ExitCode> {
    if args.wait.is_zero() {
        return match lock.try_acquire_with_value(name, ttl, value).await {
            Ok(Some(lease)) => Ok(lease),
            Ok(None) => Err(exit::busy(&**lock, name, quietly(args.quiet)).await),
            Err(e) => Err(exit::fail(&e)),
        };
    }
    let acquire = lock.acquire_with_value(name, ttl, args.wait, value);
    let report = progress::report_holder(Arc::clone(lock), name.clone(), args.quiet);
    tokio::select! {
        r = acquire => r.map_err(|e| exit::wait_failed(name, args.wait, &e, quietly(args.quiet))),
        never = report => match never {},
    }
}

/// The ticket in `args` (`-`: read from stdin, so it stays out of the process list).
pub fn ticket_of(arg: &str) -> Result<Ticket, LockError> {
    if arg != "-" {
        return arg.parse();
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| LockError::InvalidArgument(format!("cannot read a ticket from stdin: {e}")))?;
    line.parse()
}

/// The ticket in `args`, and the lease it stands for on its backend.
async fn resume(args: &TicketArgs) -> Result<(Arc<dyn DistributedLock>, Lease), ExitCode> {
    let ticket = ticket_of(&args.ticket).map_err(|e| exit::fail(&e))?;
    let lock = connect(&args.backend).await?;
    let lease = lock.resume(&ticket).await.map_err(|e| exit::fail(&e))?;
    Ok((lock, lease))
}

pub async fn renew(args: RenewArgs) -> ExitCode {
    let (lock, lease) = match resume(&args.ticket).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let lease = match args.ttl {
        Some(ttl) => {
            if let Err(e) = dlock_any::validate_ttl(ttl) {
                return exit::fail(&e);
            }
            with_ttl(&lease, ttl)
        }
        None => never_shorter(&*lock, lease).await,
    };
    match lock.renew(&lease).await {
        Ok(renewed) => {
            eprintln!(
                "dlock: renewed {} (token {}) for {}",
                renewed.name(),
                renewed.token(),
                format_duration(renewed.ttl())
            );
            // the ticket again, carrying the TTL renewals now ask for
            match Ticket::of(lock.backend_name(), &renewed) {
                Ok(t) if print(&t.to_string()) => ExitCode::SUCCESS,
                Ok(_) => ExitCode::from(exit::BACKEND),
                Err(e) => exit::fail(&e),
            }
        }
        Err(e) => exit::fail(&e),
    }
}

/// The lease to renew without `--ttl`: for the ticket's TTL, unless a renewal with a
/// longer `--ttl` (whose ticket this is not) left more than that — a renewal without
/// `--ttl` never shortens the lease. (ZooKeeper's node keeps the TTL it was handed
/// over with whatever a renewal asks.)
async fn never_shorter(lock: &dyn DistributedLock, lease: Lease) -> Lease {
    match lock.inspect(lease.name()).await {
        Ok(Some(h))
            if h.owner == *lease.owner()
                && h.token == lease.token()
                && h.remaining > lease.ttl()
                && lock.capabilities().lease_scope == dlock_any::LeaseScope::PerLease =>
        {
            // to the millisecond above what is left (never past what was asked: a
            // Redlock restart delay bounds it)
            let millis =
                h.remaining.as_millis() + u128::from(h.remaining.subsec_nanos() % 1_000_000 > 0);
            with_ttl(
                &lease,
                Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX)),
            )
        }
        _ => lease,
    }
}

/// The lease renewing for `ttl` instead of the ticket's (a lease carries the TTL its
/// renewals ask for), with what the backend keeps in it (etcd: the key's own lease).
fn with_ttl(lease: &Lease, ttl: Duration) -> Lease {
    lease.renewed(ttl, tokio::time::Instant::now())
}

pub async fn release(args: TicketArgs) -> ExitCode {
    // a lock name where a ticket belongs: the operator meant to break the lock
    let given = args.ticket.trim();
    if !given.starts_with("dlock-ticket") && given != "-" {
        eprintln!(
            "dlock: {:?} is not a ticket: `release TICKET` gives back a lock `dlock acquire` \
             took; `release --force NAME` breaks whoever holds NAME",
            args.ticket
        );
        return ExitCode::from(exit::USAGE);
    }
    let ticket = match ticket_of(&args.ticket) {
        Ok(t) => t,
        Err(e) => return exit::fail(&e),
    };
    let lock = match connect(&args.backend).await {
        Ok(l) => l,
        Err(code) => return code,
    };
    let lease = match lock.resume(&ticket).await {
        Ok(l) => l,
        Err(LockError::LeaseLost { .. }) => return gone(&ticket),
        Err(e) => return exit::fail(&e),
    };
    match lock.release(&lease).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) | Err(LockError::LeaseLost { .. }) => gone(&ticket),
        Err(e) => exit::fail(&e),
    }
}

/// A ticket whose lease is no longer there: released already, run out, or broken —
/// which, nobody can tell afterwards; if it was not released, the lock may have had
/// another holder meanwhile.
fn gone(ticket: &Ticket) -> ExitCode {
    eprintln!(
        "dlock: this ticket no longer holds {}: released already, run out (--ttl) or \
         broken by `release --force`; if it was not released, another holder may have had \
         the lock meanwhile",
        ticket.name()
    );
    ExitCode::from(exit::LEASE_LOST)
}
