//! Writing a command's answer to stdout.

use std::io::Write as _;
use std::process::ExitCode;

use crate::exit;

/// Writes `bytes` to stdout and flushes; the exit code to end with when stdout is gone
/// (a closed pipe).
pub fn write(bytes: &[u8]) -> Result<(), ExitCode> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|_| ExitCode::from(exit::BACKEND))
}
