//! The library's log lines on stderr: warnings by default (a renewal failed, a lease
//! is suspect or lost, a fallback served an acquisition), more with `-v`, errors only
//! with `-q`; `RUST_LOG` (e.g. `RUST_LOG=dlock=debug,sqlx=info`) overrides both.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The filter for `verbose` (`-v` count) and `quiet`: dlock's own crates (every
/// target starting with `dlock`) one step chattier than the clients under them.
fn default_filter(verbose: u8, quiet: bool) -> &'static str {
    match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "error,dlock=warn",
        (false, 1) => "warn,dlock=info",
        (false, 2) => "info,dlock=debug",
        _ => "debug,dlock=trace",
    }
}

/// Installs the stderr subscriber (once; a second call does nothing).
pub fn init(verbose: u8, quiet: bool) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(default_filter(verbose, quiet)));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(verbose >= 2)
        .without_time()
        .compact()
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_wins_and_verbosity_climbs() {
        assert_eq!(default_filter(3, true), "error");
        assert_eq!(default_filter(0, false), "error,dlock=warn");
        assert_eq!(default_filter(2, false), "info,dlock=debug");
        assert_eq!(default_filter(9, false), "debug,dlock=trace");
        for v in 0..4 {
            assert!(EnvFilter::try_new(default_filter(v, false)).is_ok());
        }
    }
}
