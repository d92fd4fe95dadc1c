//! `gates-lab`: run a lab until Ctrl-C or SIGTERM, printing where its files are. The same
//! command is `gates lab`; both take [`gates_lab::cli::LabArgs`].

use clap::Parser;
use gates_lab::cli::LabArgs;

#[derive(Parser, Debug)]
#[command(name = "gates-lab", version)]
struct Args {
    #[command(flatten)]
    lab: LabArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "gates_lab=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    std::process::ExitCode::from(gates_lab::cli::run("gates-lab", &args.lab).await)
}
