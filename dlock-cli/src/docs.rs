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
    let top = command();
    if let Some(dir) = &args.out_dir {
        return match clap_mangen::generate_to(top, dir) {
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
        Some(name) => {
            let Some(sub) = top.find_subcommand(name).cloned() else {
                eprintln!("dlock: no subcommand {name:?} (dlock --help lists them)");
                return ExitCode::from(exit::USAGE);
            };
            // named as generate_to names it, so the top page's SEE ALSO finds it
            let title = format!("dlock-{}", sub.get_name());
            let usage = format!("dlock {}", sub.get_name());
            sub.display_name(title)
                .bin_name(usage)
                .version(env!("CARGO_PKG_VERSION"))
        }
    };
    let mut roff = Vec::new();
    if clap_mangen::Man::new(page).render(&mut roff).is_err() {
        return ExitCode::from(exit::BACKEND);
    }
    emit(&roff)
}
