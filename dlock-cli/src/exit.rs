//! The exit codes of `dlock`, distinct per outcome.

use std::process::ExitCode;

use dlock_any::LockError;

/// `status` found a name free, `leader` found no leader: as `test` says false, so a
/// script can ask without parsing.
pub const FREE: u8 = 1;
/// Bad usage: unknown flag, malformed duration or URL (clap's own code), a primitive
/// the backend does not offer.
pub const USAGE: u8 = 2;
/// The backend could not be reached (sysexits EX_UNAVAILABLE).
pub const UNAVAILABLE: u8 = 69;
/// `--wait 0` and the lock is held by someone else (or, for `--permits N`, by holders
/// of another count: an idle name takes any count, a held one only its holders').
pub const BUSY: u8 = 73;
/// The wait ran out before the lock came free (or before a semaphore held with another
/// permit count went idle).
pub const TIMEOUT: u8 = 74;
/// The lease was lost while the command ran; the command was terminated.
pub const LEASE_LOST: u8 = 75;
/// The hold reached `--max-hold`; the command was stopped.
pub const MAX_HOLD: u8 = 76;
/// The command was not found (as a shell says it).
pub const CANNOT_EXEC: u8 = 127;
/// The command was found but could not be run: not executable, a directory, not a
/// program (as a shell says it).
pub const NOT_EXECUTABLE: u8 = 126;
/// The backend answered with an error.
pub const BACKEND: u8 = 70;
/// `dlock doctor` found a setting that breaks a guarantee (sysexits EX_CONFIG).
pub const GUARANTEE_BROKEN: u8 = 78;

/// The exit code for an error that ended `dlock` before or instead of the command.
pub fn for_error(e: &LockError) -> u8 {
    match e {
        LockError::InvalidName { .. }
        | LockError::InvalidArgument(_)
        | LockError::Config(_)
        | LockError::Unsupported { .. } => USAGE,
        LockError::PermitsMismatch { .. } => BUSY,
        LockError::Timeout { .. } => TIMEOUT,
        LockError::LeaseLost { .. } => LEASE_LOST,
        LockError::HoldExpired { .. } => MAX_HOLD,
        LockError::Unavailable { .. } => UNAVAILABLE,
        _ => BACKEND,
    }
}

/// How a run that did not get its lock ends: silent with `-q`, and with
/// `--busy-exit`'s code instead of [`BUSY`] or [`TIMEOUT`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Skipped {
    /// Say nothing.
    pub quiet: bool,
    /// The exit code instead of [`BUSY`] / [`TIMEOUT`].
    pub code: Option<u8>,
}

/// Says who holds `name` (when `--wait 0` found it busy) and returns [`BUSY`].
pub async fn busy(
    lock: &dyn dlock_any::DistributedLock,
    name: &dlock_any::LockName,
    how: Skipped,
) -> ExitCode {
    if !how.quiet {
        let holder = match lock.inspect(name).await {
            Ok(Some(h)) => format!(" by {} (token {})", crate::holder::who(&h), h.token),
            _ => String::new(),
        };
        eprintln!("dlock: {name} is held{holder}; not waiting (--wait 0)");
    }
    ExitCode::from(how.code.unwrap_or(BUSY))
}

/// The exit code of a wait for `name` that ended in `e`: [`TIMEOUT`] (said so) when
/// `wait` ran out, else the error's.
pub fn wait_failed(
    name: &dlock_any::LockName,
    wait: std::time::Duration,
    e: &LockError,
    how: Skipped,
) -> ExitCode {
    if let LockError::Timeout { .. } = e {
        if !how.quiet {
            eprintln!(
                "dlock: gave up waiting for {name} after {}",
                dlock_any::format_duration(wait)
            );
        }
        return ExitCode::from(how.code.unwrap_or(TIMEOUT));
    }
    fail(e)
}

/// A semaphore held with another permit count than this run's: [`BUSY`] under
/// `--wait 0`, [`TIMEOUT`] when a wait for the name to go idle ran out — like any
/// other run that did not get its lock, `-q` and `--busy-exit` apply.
pub fn other_count(e: &LockError, wait: std::time::Duration, how: Skipped) -> ExitCode {
    let (code, what) = if wait.is_zero() {
        (BUSY, "not waiting (--wait 0)".to_owned())
    } else {
        let waited = dlock_any::format_duration(wait);
        (
            TIMEOUT,
            format!("gave up waiting for it to go idle after {waited}"),
        )
    };
    if !how.quiet {
        eprintln!("dlock: {e}; {what}");
    }
    ExitCode::from(how.code.unwrap_or(code))
}

/// Prints the error and returns its exit code.
pub fn fail(e: &LockError) -> ExitCode {
    eprintln!("dlock: {e}");
    ExitCode::from(for_error(e))
}

/// The exit code of a process a signal ended (128 + its number, as a shell reports
/// it), for a dlock that stopped waiting on one.
pub fn signalled(signal: nix::sys::signal::Signal) -> ExitCode {
    ExitCode::from(u8::try_from(128 + (signal as i32 & 0x7f)).unwrap_or(1))
}
