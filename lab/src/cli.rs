//! The one command-line definition of the lab, used by the `gates-lab` binary and flattened
//! into `gates lab`, and the loop both run: start, say where the files are, wait for Ctrl-C or
//! SIGTERM, stop.

use std::path::PathBuf;

use clap::Args;

use crate::addr::{DEFAULT_SUBNET, SubnetChoice};
use crate::{Lab, LabOptions};

/// A local, protocol-faithful simulation of Proxmox hosts, Talos nodes and Kubernetes.
#[derive(Debug, Clone, Args)]
pub struct LabArgs {
    /// A built-in scenario (adr-007, staging-today, ...) or a path to a scenario file.
    #[arg(long, default_value = "adr-007")]
    pub scenario: String,
    /// Simulated seconds per real second.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Serve on 127.SUBNET.x.y, exactly (in use is an error). Without it: 127.77, or the
    /// first free subnet after it when another lab or test run holds 127.77.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=254))]
    pub subnet: Option<u8>,
    /// Where the lab writes its kubeconfig, talosconfig, Proxmox token and ground truth.
    #[arg(long, default_value = "target/lab", value_name = "DIR")]
    pub state_dir: PathBuf,
    /// Where the lab writes its environment files (lab.yaml, lab-production.yaml).
    #[arg(
        long = "write-env-dir",
        default_value = "gates/environments",
        value_name = "DIR"
    )]
    pub write_env_dir: PathBuf,
    /// Generate a scale scenario with this many nodes instead of loading one.
    #[arg(long, value_name = "N")]
    pub generate_nodes: Option<usize>,
    /// With --generate-nodes: pods per worker node (default 10).
    #[arg(long, value_name = "N", requires = "generate_nodes")]
    pub pods_per_node: Option<usize>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    pub list_scenarios: bool,
}

impl LabArgs {
    /// The options [`Lab::start`] takes.
    pub fn options(&self) -> LabOptions {
        LabOptions {
            scenario: self.scenario.clone(),
            generate_nodes: self.generate_nodes,
            pods_per_node: self.pods_per_node,
            subnet: self.subnet.unwrap_or(DEFAULT_SUBNET),
            subnet_choice: match self.subnet {
                Some(_) => SubnetChoice::Exactly,
                None => SubnetChoice::FirstFree,
            },
            speed: self.speed,
            state_dir: self.state_dir.clone(),
            env_dir: Some(self.write_env_dir.clone()),
        }
    }
}

/// Runs the lab until Ctrl-C or SIGTERM; `prog` names the command in messages. Returns the
/// exit code: 0 after a clean stop, 2 when the lab could not start (bad scenario, address in
/// use).
pub async fn run(prog: &str, args: &LabArgs) -> u8 {
    if args.list_scenarios {
        for (name, _) in crate::scenario::BUILTIN {
            println!("{name}");
        }
        return 0;
    }
    let lab = match Lab::start(args.options()).await {
        Ok(lab) => lab,
        Err(e) => {
            eprintln!("{prog}: {e}");
            return 2;
        }
    };
    let f = &lab.files;
    eprintln!(
        "{prog}: scenario {} running at speed {} on 127.{}.x.y{}",
        args.scenario,
        args.speed,
        lab.plan.subnet,
        moved(DEFAULT_SUBNET, args.subnet, lab.plan.subnet)
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
    eprintln!("Try `gates check lab` in another terminal. Ctrl-C (or SIGTERM) stops the lab.");
    wait_for_stop_signal().await;
    eprintln!(
        "{prog}: stopping; ground truth in {}",
        lab.files.ground_truth.display()
    );
    lab.stop().await;
    0
}

/// What to say when the lab did not get the subnet it would have had: "" when it did.
pub fn moved(default: u8, asked: Option<u8>, got: u8) -> String {
    let wanted = asked.unwrap_or(default);
    if wanted == got {
        String::new()
    } else {
        format!(" (127.{wanted}.x.y is in use by another lab or test run; moved)")
    }
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
