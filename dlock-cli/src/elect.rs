//! `dlock elect`: run a command only while leading an election.

use std::convert::Infallible;
use std::process::ExitCode;
use std::time::Duration;

use dlock_any::{Backoff, Election, Leader, ProcessHolder};
use tokio::time::Instant;

use crate::child::{self, Ended, Signals, Stop};
use crate::cli::ElectArgs;
use crate::{exit, holder, url};

pub async fn elect(args: ElectArgs) -> ExitCode {
    let value = match args.value.clone() {
        Some(v) => v,
        None => {
            match ProcessHolder::this_process(&holder::command_name(&args.command)).to_value() {
                Ok(v) => v.as_str().to_owned(),
                Err(e) => return exit::fail(&e),
            }
        }
    };
    let resolved = url::resolve(args.backend.url.as_deref())
        .and_then(|u| url::no_fallback(&u, "an election").map(|()| u));
    let backend = match resolved {
        Ok(u) => match dlock_any::connect(&u).await {
            Ok(b) => b,
            Err(e) => return exit::fail(&e),
        },
        Err(e) => return exit::fail(&e),
    };
    let election = match Election::new(backend, &args.name) {
        Ok(e) => e.with_ttl(args.ttl),
        Err(e) => return exit::fail(&e),
    };
    let Some(mut signals) = Signals::install() else {
        eprintln!("dlock: cannot install signal handlers");
        return ExitCode::from(exit::BACKEND);
    };
    let mut pause = Backoff::new(REQUEUE_PAUSE, args.ttl.max(REQUEUE_PAUSE));
    loop {
        let (over, led_for) = match lead_once(&election, &value, &args, &mut signals).await {
            Term::Over(code, led_for) => (code, led_for),
            Term::Final(code) => return code,
        };
        if !args.requeue || signals.stop_was_forwarded() {
            return over;
        }
        if led_for >= args.ttl {
            pause = Backoff::new(REQUEUE_PAUSE, args.ttl.max(REQUEUE_PAUSE));
        }
        tokio::select! {
            biased;
            signal = signals.stop_requested_standing_by() => return exit::signalled(signal),
            () = tokio::time::sleep(pause.next_delay(None)) => {}
        }
        if !args.quiet {
            eprintln!("dlock: campaigning again for {}", args.name);
        }
    }
}

/// The first pause before `--requeue` campaigns again after a short leadership; it
/// doubles while leaderships keep ending within a TTL, up to the TTL.
const REQUEUE_PAUSE: Duration = Duration::from_millis(200);

/// How one leadership ended.
enum Term {
    /// The command exited, or the leadership was lost and the command stopped, after
    /// leading this long: with `--requeue`, campaign again; else exit with this code.
    Over(ExitCode, Duration),
    /// Exit with this code whatever `--requeue` says (a signal while standing by, an
    /// error that retrying cannot cure).
    Final(ExitCode),
}

/// Campaigns, then runs the command while leading.
async fn lead_once(
    election: &Election,
    value: &str,
    args: &ElectArgs,
    signals: &mut Signals,
) -> Term {
    let report = report_standby(election.clone(), args.quiet);
    let leadership = tokio::select! {
        // first: a stop that arrived as the campaign won must not start the command
        biased;
        // the campaign is dropped here, and its candidacy with it
        signal = standing_by(signals, args.requeue) => {
            return Term::Final(exit::signalled(signal));
        }
        r = election.campaign(value) => match r {
            Ok(l) => l,
            Err(e) => return Term::Final(exit::fail(&e)),
        },
        never = report => match never {},
    };
    let led_from = Instant::now();
    if !args.quiet {
        eprintln!(
            "dlock: leading {} as {value:?} (epoch {})",
            args.name,
            leadership.epoch()
        );
    }
    // a command never starts on a leadership already lost
    if !leadership.guard().is_held() {
        eprintln!(
            "dlock: leadership of {} lost before the command could start; not starting it",
            args.name
        );
        let _ = leadership.resign().await;
        return Term::Over(ExitCode::from(exit::LEASE_LOST), led_from.elapsed());
    }
    let lease = leadership.guard().lease();
    let env = [
        ("DLOCK_NAME", args.name.clone()),
        ("DLOCK_EPOCH", leadership.epoch().to_string()),
        ("DLOCK_TOKEN", leadership.epoch().to_string()),
        ("DLOCK_VALUE", value.to_owned()),
        ("DLOCK_OWNER", lease.owner().to_string()),
    ];
    let stop = Stop {
        how: args.on_lost,
        grace: args.grace,
    };
    // the TTL the backend enforces (a ZooKeeper session's, say), not the one asked for
    let ttl = lease.ttl();
    let job = match child::spawn(
        &args.command,
        &env,
        stop.graces(ttl),
        leadership.guard().lease().valid_until(),
    ) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("dlock: cannot start the command's supervisor: {e}");
            let _ = leadership.resign().await;
            return Term::Final(ExitCode::from(exit::CANNOT_EXEC));
        }
    };
    let ended = child::supervise(
        job,
        child::Lease {
            lost: leadership.lost(),
            valid_until: || leadership.guard().lease().valid_until(),
            ttl,
        },
        signals,
        stop,
    )
    .await;
    match ended {
        Ended::Exited(code) => {
            // lost while the command ran, unseen until now (a break between two
            // renewals): the command may have run beside the next leader
            let lost = !leadership.guard().is_held();
            match (lost, leadership.resign().await) {
                (false, Ok(true)) => {}
                (true, _) | (_, Ok(false)) => {
                    eprintln!(
                        "dlock: leadership of {} was no longer held when the command ended \
                         (broken by release --force, or run out unseen): the command may have \
                         run beside the next leader",
                        args.name
                    );
                    return Term::Over(ExitCode::from(exit::LEASE_LOST), led_from.elapsed());
                }
                (false, Err(e)) => {
                    eprintln!("dlock: resigning failed ({e}); the leadership ends by its TTL");
                }
            }
            match code {
                // it could not be run (126: not executable, 127: not found): running
                // it again on the next leadership would fail the same way
                Ok(c @ (126 | 127)) => Term::Final(ExitCode::from(c)),
                Ok(c) => Term::Over(ExitCode::from(c), led_from.elapsed()),
                Err(e) => {
                    eprintln!("dlock: waiting for the command failed: {e}");
                    Term::Final(ExitCode::from(exit::BACKEND))
                }
            }
        }
        Ended::Lost => {
            eprintln!(
                "dlock: leadership of {} lost; stopped the command",
                args.name
            );
            // owner-checked: harmless when another candidate leads by now
            let _ = leadership.resign().await;
            Term::Over(ExitCode::from(exit::LEASE_LOST), led_from.elapsed())
        }
    }
}

/// The signal that ends a candidate standing by: any of the six without
/// `--requeue` (each would end dlock by default); with it only a stop (SIGTERM, SIGINT,
/// SIGQUIT) — a SIGHUP, SIGUSR1 or SIGUSR2 meant for the command finds none to go to,
/// and is not a reason to stop standing.
async fn standing_by(signals: &mut Signals, requeue: bool) -> nix::sys::signal::Signal {
    if requeue {
        signals.stop_requested_standing_by().await
    } else {
        signals.any().await
    }
}

/// Says who leads each time it changes while this candidate stands by. Never returns;
/// drop it when the campaign ends.
async fn report_standby(election: Election, quiet: bool) -> Infallible {
    let mut changes = election.observe();
    loop {
        match changes.next().await {
            Ok(Some(l)) if !quiet => eprintln!(
                "dlock: standing by for {}: {}",
                election.name(),
                describe(&l)
            ),
            Ok(_) => {}
            Err(e) => {
                if !quiet {
                    eprintln!(
                        "dlock: standing by for {}: cannot see the leader: {e}",
                        election.name()
                    );
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// A leader in words: the process it said it was, else its value.
pub fn describe(l: &Leader) -> String {
    let process = l
        .value
        .as_deref()
        .and_then(|v| dlock_any::HolderValue::new(v).ok())
        .and_then(|v| dlock_any::ProcessHolder::from_value(&v));
    match (process, &l.value) {
        (Some(p), _) => format!("led by {p} (epoch {})", l.epoch),
        (None, Some(v)) => format!("led by {v:?} (epoch {})", l.epoch),
        (None, None) => format!("held without a value (epoch {})", l.epoch),
    }
}
