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

pub fn man() -> ExitCode {
    let mut page = Vec::new();
    if clap_mangen::Man::new(command()).render(&mut page).is_err() {
        return ExitCode::from(exit::BACKEND);
    }
    emit(&page)
}
