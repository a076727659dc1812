//! `dlock completions` and `dlock man`: generated from the clap definition, so they
//! never drift from `--help`.

use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::{Cli, Shell, long_version};
use crate::exit;

fn command() -> clap::Command {
    Cli::command().long_version(long_version())
}

/// Writes `bytes` to stdout.
fn emit(bytes: &[u8]) -> ExitCode {
    match crate::stdout::write(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

pub fn completions(shell: Shell) -> ExitCode {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "dlock", &mut script);
    emit(&script)
}

/// The top page, one subcommand's page (`dlock-run(1)`, the page the top one's SEE
/// ALSO names), or every page written into a directory.
pub fn man(args: &crate::cli::ManArgs) -> ExitCode {
    let mut top = command().disable_help_subcommand(true);
    top.build();
    if let Some(dir) = &args.out_dir {
        return match write_pages(&top, dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!(
                    "dlock: cannot write the manual pages into {}: {e}",
                    dir.display()
                );
                ExitCode::FAILURE
            }
        };
    }
    let page = match &args.subcommand {
        None => top,
        Some(name) => match subcommand_page(&top, name) {
            Some(sub) => sub,
            None => {
                eprintln!("dlock: no subcommand {name:?} (dlock --help lists them)");
                return ExitCode::from(exit::USAGE);
            }
        },
    };
    match render(&page) {
        Ok(roff) => emit(&roff),
        Err(_) => ExitCode::from(exit::BACKEND),
    }
}

/// `dlock NAME`'s page, titled as the top page's SEE ALSO names it (`dlock-run`).
fn subcommand_page(top: &clap::Command, name: &str) -> Option<clap::Command> {
    let sub = top.find_subcommand(name)?.clone();
    let title = format!("dlock-{}", sub.get_name());
    let usage = format!("dlock {}", sub.get_name());
    Some(
        sub.display_name(title)
            .bin_name(usage)
            .version(env!("CARGO_PKG_VERSION")),
    )
}

/// `dlock.1` and one `dlock-SUBCOMMAND.1` per subcommand, into `dir`.
fn write_pages(top: &clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::write(dir.join("dlock.1"), render(top)?)?;
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        if let Some(page) = subcommand_page(top, sub.get_name()) {
            std::fs::write(
                dir.join(format!("dlock-{}.1", sub.get_name())),
                render(&page)?,
            )?;
        }
    }
    Ok(())
}

/// A page in the sections a manual reader looks for: NAME, SYNOPSIS, DESCRIPTION,
/// OPTIONS, SUBCOMMANDS, EXIT STATUS, ENVIRONMENT, EXAMPLES — the help's closing text
/// split by its leading words ("Exit codes:", "Backend:", "Examples:") instead of
/// one EXTRA section holding everything.
fn render(cmd: &clap::Command) -> std::io::Result<Vec<u8>> {
    use roff::{Roff, roman};
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    let closing = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    let parts = Parts::of(&closing);
    let mut roff = Roff::new();
    // the NAME line already says what `about` says: the description is the prose
    let long = cmd.get_long_about().map(ToString::to_string);
    if long.is_some() || !parts.prose.is_empty() {
        roff.control("SH", ["DESCRIPTION"]);
        for paragraph in long.iter().chain(&parts.prose) {
            roff.control("PP", [])
                .text([roman(paragraph.replace('\n', " "))]);
        }
    }
    roff.to_writer(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out)?;
    }
    let mut roff = Roff::new();
    for (title, paragraphs) in [
        ("EXIT STATUS", &parts.exit),
        ("ENVIRONMENT", &parts.environment),
    ] {
        if !paragraphs.is_empty() {
            roff.control("SH", [title]);
            for paragraph in paragraphs {
                roff.control("PP", [])
                    .text([roman(paragraph.replace('\n', " "))]);
            }
        }
    }
    if !parts.examples.is_empty() {
        roff.control("SH", ["EXAMPLES"]).control("nf", []);
        for line in &parts.examples {
            roff.text([roman(line.trim_start())]);
        }
        roff.control("fi", []);
    }
    roff.to_writer(&mut out)?;
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// A help's closing text, by what each paragraph is about.
#[derive(Default)]
struct Parts {
    prose: Vec<String>,
    exit: Vec<String>,
    environment: Vec<String>,
    examples: Vec<String>,
}

impl Parts {
    fn of(text: &str) -> Self {
        let mut parts = Self::default();
        let mut in_examples = false;
        for paragraph in text.split("\n\n") {
            // "Examples:" may close a paragraph's last line or open its own
            let (before, examples) = match paragraph.find("Examples:") {
                Some(i) => (&paragraph[..i], Some(&paragraph[i + "Examples:".len()..])),
                None => (paragraph, None),
            };
            let before = before.trim();
            if in_examples && examples.is_none() && !before.is_empty() {
                parts.examples.extend(before.lines().map(str::to_owned));
            } else if !before.is_empty() {
                let kind =
                    if before.starts_with("Exit codes:") || before.starts_with("Exit status:") {
                        &mut parts.exit
                    } else if before.starts_with("Backend:") {
                        &mut parts.environment
                    } else {
                        &mut parts.prose
                    };
                kind.push(before.to_owned());
            }
            if let Some(lines) = examples {
                in_examples = true;
                parts.examples.extend(
                    lines
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(str::to_owned),
                );
            }
        }
        parts
    }
}
