//! `gates completions SHELL` and `gates man`: generated from the command-line definition.

use gates_core::exit::ExitCode;
use std::io::Write;
use std::path::Path;

use crate::cli::Cli;
use crate::error::AppError;

pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut command = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut command, "gates", &mut std::io::stdout());
    ExitCode::Passed
}

pub fn man() -> Result<ExitCode, AppError> {
    let command = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut out)
        .map_err(AppError::file(Path::new("man page"), "render"))?;
    std::io::stdout()
        .write_all(&out)
        .map_err(AppError::file(Path::new("stdout"), "print the man page"))?;
    Ok(ExitCode::Passed)
}
