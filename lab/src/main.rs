//! `gates-lab`: run a lab until Ctrl-C, printing where its files are.

use clap::Parser;
use gates_lab::{Lab, LabOptions};
use std::path::PathBuf;

/// A local, protocol-faithful simulation of Proxmox hosts, Talos nodes and Kubernetes.
#[derive(Parser, Debug)]
#[command(name = "gates-lab", version)]
struct Args {
    /// Scenario: a built-in name (adr-007, staging-today, ...) or a path to a .yaml file.
    #[arg(long, default_value = "adr-007")]
    scenario: String,
    /// Simulated seconds per real second.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// The subnet byte S: servers listen on 127.S.x.y.
    #[arg(long, default_value_t = 77, value_parser = clap::value_parser!(u8).range(1..=254))]
    subnet: u8,
    /// Where the kubeconfig, talosconfig, Proxmox token and ground truth are written.
    #[arg(long, default_value = "target/lab")]
    state_dir: PathBuf,
    /// Where the environment files (lab.yaml, lab-production.yaml) are written.
    #[arg(long, default_value = "gates/environments")]
    env_dir: PathBuf,
    /// Generate a scale scenario with this many nodes instead of loading one.
    #[arg(long)]
    generate_nodes: Option<usize>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    list_scenarios: bool,
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
    if args.list_scenarios {
        for (name, _) in gates_lab::scenario::BUILTIN {
            println!("{name}");
        }
        return std::process::ExitCode::SUCCESS;
    }
    let opts = LabOptions {
        scenario: args.scenario.clone(),
        generate_nodes: args.generate_nodes,
        subnet: args.subnet,
        speed: args.speed,
        state_dir: args.state_dir,
        env_dir: Some(args.env_dir),
    };
    let lab = match Lab::start(opts).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("gates-lab: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let f = &lab.files;
    eprintln!(
        "gates-lab: scenario {} running at speed {} on 127.{}.x.y",
        args.scenario, args.speed, args.subnet
    );
    eprintln!("  kubeconfig:  {}", f.kubeconfig.display());
    eprintln!("  talosconfig: {}", f.talosconfig.display());
    eprintln!(
        "  proxmox:     token {} CA {}",
        f.proxmox_token.display(),
        f.proxmox_ca.display()
    );
    for e in &f.env_files {
        eprintln!("  environment: {}", e.display());
    }
    eprintln!(
        "  control:     http://{}/events  /requests  /health",
        lab.plan.control_addr()
    );
    eprintln!("Press Ctrl-C (or send SIGTERM) to stop.");
    wait_for_stop_signal().await;
    eprintln!(
        "gates-lab: stopping; ground truth in {}",
        lab.files.ground_truth.display()
    );
    lab.stop().await;
    std::process::ExitCode::SUCCESS
}

/// Ctrl-C, or SIGTERM (how CI and process managers stop a service).
async fn wait_for_stop_signal() {
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
