//! The library's log lines on stderr: warnings by default (a renewal failed, a lease
//! is suspect or lost, a fallback served an acquisition), more with `-v`, errors only
//! with `-q`; `RUST_LOG` (e.g. `RUST_LOG=dlock=debug,sqlx=info`) overrides both.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

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
        .with_ansi(false)
        .event_format(Lines {
            target: verbose >= 2,
        })
        .try_init();
}

/// The library's lines as dlock's own read: `dlock: warning: lease suspect: renewal …
/// lock=nightly error=…` — the level as a word (none for info), the message, then
/// the fields of the event and of the spans it happened in.
struct Lines {
    /// Name the module each line comes from (`-vv` and more).
    target: bool,
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let level = match *meta.level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            Level::INFO => "",
            Level::DEBUG => "debug: ",
            Level::TRACE => "trace: ",
        };
        write!(writer, "dlock: {level}")?;
        if self.target {
            write!(writer, "{}: ", meta.target())?;
        }
        ctx.format_fields(writer.by_ref(), event)?;
        for span in ctx.event_scope().into_iter().flat_map(|s| s.from_root()) {
            let extensions = span.extensions();
            if let Some(fields) = extensions.get::<FormattedFields<N>>()
                && !fields.is_empty()
            {
                write!(writer, " {fields}")?;
            }
        }
        writeln!(writer)
    }
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
