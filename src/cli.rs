//! Command-line definitions (clap) only; the work happens in [`crate::app`]. Each command's
//! arguments become the plain options the engine and the reporters take (`From` below).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::output::{Color, Format};
#[cfg(feature = "lab")]
pub use gates_lab::cli::LabArgs;

#[derive(Debug, Parser)]
#[command(
    name = "gates",
    version = crate::version::LONG,
    about = "Verify the rollout gates of ADR 007 against live infrastructure or snapshots."
)]
pub struct Cli {
    /// Configuration directory: environments/ and one directory of gate files per decision.
    #[arg(long, global = true, default_value = "gates", value_name = "DIR")]
    pub config: PathBuf,
    /// Another directory of environment files (repeatable), e.g. the one the lab writes; its
    /// files override same-named ones from the configuration directory.
    #[arg(long = "env-dir", global = true, value_name = "DIR")]
    pub env_dirs: Vec<PathBuf>,
    /// Use this kubeconfig instead of the environment file's `kube.kubeconfig`.
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Use this kubeconfig context instead of the environment file's `kube.context`.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the gates, their checks and the environments.
    List,
    /// Evaluate the gates that apply to an environment (read-only).
    Check(CheckArgs),
    /// Keep ENV's state current and serve its verdicts over HTTP (metrics, health, the check
    /// page), re-evaluating the trials whose inputs change (read-only).
    Watch(WatchArgs),
    /// Write what `check` would read from a live cluster to a file, for offline runs.
    Snapshot(SnapshotArgs),
    /// Gate 4: power off one Proxmox host's VMs of ENV, probe, measure, restore, verify.
    Chaos(ChaosArgs),
    /// Predict, for each Proxmox host, whether the cluster survives its loss (read-only).
    Predict(PredictArgs),
    /// Start every VM a chaos run stopped, from its journal (safe to run twice).
    Recover(RecoverArgs),
    /// Wait until ENV is steady for the next one-member-at-a-time change: etcd healthy with the
    /// expected members and one leader, every node Ready, the API VIP answering (read-only).
    Guard(GuardArgs),
    /// Run the built-in lab (simulated Proxmox hosts, Talos nodes, Kubernetes) until Ctrl-C.
    #[cfg(feature = "lab")]
    Lab(LabArgs),
    /// Start the lab, check its staging and production, run the chaos step, write reports.
    #[cfg(feature = "lab")]
    Demo(DemoArgs),
    /// Per gate and per chaos host, the last results from the reports directory, with trends.
    History(HistoryArgs),
    /// Update the ADR's Rollout line and gate markers from the newest check reports.
    Adr(AdrArgs),
    /// Load and check the configuration without touching any system.
    Validate,
    /// Check values files for the Helm chart against its schema, naming the file, line and key
    /// of every problem (Helm names the path alone); needs no configuration.
    ChartValues(ChartValuesArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Print the man page (roff).
    Man,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The environment.
    pub env: String,
    /// Where to serve /metrics, /healthz, /readyz and the check page. Loopback unless told
    /// otherwise (in a pod: `0.0.0.0:9848`).
    #[arg(long, default_value = "127.0.0.1:9848", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// Between reads of the sources that cannot be watched (Talos, Proxmox, the API endpoint,
    /// Prometheus, the chaos reports, the Metrics API).
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub interval: std::time::Duration,
    /// How long a source may be unreadable before the trials that read it are errors.
    #[arg(long, default_value = "3m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub stale_after: std::time::Duration,
    /// How long changes gather before they are evaluated together.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub debounce: std::time::Duration,
    /// Directory of the chaos reports gate 4 judges.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub reports: PathBuf,
    /// Also keep the verdicts in the cluster watched, as the ClusterPolicyReport `gates-ENV`
    /// (wgpolicyk8s.io/v1alpha2): written once ready, then after each evaluation that changes
    /// a verdict or a message; a failed write is retried every --interval.
    #[arg(long)]
    pub policy_report: bool,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The environment.
    pub env: String,
    /// How many runs per gate and per chaos host.
    #[arg(long, default_value_t = 10)]
    pub last: usize,
    /// Directory of the reports.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub reports: PathBuf,
    /// Output on stdout.
    #[arg(long, value_enum, default_value_t = Format::Pretty)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct AdrArgs {
    /// The environments whose newest check reports decide the gates (e.g. staging production).
    #[arg(required = true)]
    pub envs: Vec<String>,
    /// The ADR file to update.
    #[arg(long, value_name = "FILE")]
    pub update: PathBuf,
    /// Show the diff, write nothing (the default when CI is set).
    #[arg(long, conflicts_with = "write")]
    pub dry_run: bool,
    /// Write the file even when CI is set.
    #[arg(long)]
    pub write: bool,
    /// Directory of the reports.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub reports: PathBuf,
}

#[derive(Debug, Args)]
pub struct ChartValuesArgs {
    /// The values files, as given to `helm install -f`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Where a run's metrics go besides its reports.
#[derive(Debug, Clone, Default, Args)]
pub struct MetricsArgs {
    /// Write the run's metrics (OpenMetrics text) here, e.g. for node_exporter's textfile
    /// collector.
    #[arg(long, value_name = "PATH")]
    pub metrics: Option<PathBuf>,
    /// Push the run's metrics to this Prometheus Pushgateway.
    #[arg(long, value_name = "URL")]
    pub pushgateway: Option<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Simulated seconds per real second.
    #[arg(long, default_value_t = 20.0)]
    pub speed: f64,
    /// Serve the lab on 127.SUBNET.x.y, exactly. Without it: 127.77, or the first free
    /// subnet after it when another lab or test run holds 127.77.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=254))]
    pub subnet: Option<u8>,
    /// Directory for the reports.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub reports: PathBuf,
    /// Skip the chaos step.
    #[arg(long)]
    pub no_chaos: bool,
}

#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// The environment (its file must say `chaos: {allowed: true}`).
    pub env: String,
    /// The Proxmox host: a name, `auto` (rotates by date), or `worst` (holds the API VIP
    /// and the L2 lease).
    #[arg(long, default_value = "auto", value_name = "NAME|auto|worst")]
    pub host: String,
    /// Print the plan and stop before touching anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Confirm a run on production.
    #[arg(long)]
    pub yes: bool,
    /// Shut the whole host down instead of its VMs of ENV (refused when it runs anything else).
    #[arg(long)]
    pub whole_host: bool,
    /// The fault: `power` stops the host's VMs of ENV; `partition` keeps them running and pulls
    /// the link of every network device (`link_down=1`), restored with `link_down=0`.
    #[arg(long, value_enum, default_value_t = FaultArg::Power)]
    pub fault: FaultArg,
    /// Run even when the host-loss prediction says the loss is not survivable (to measure it).
    #[arg(long)]
    pub expect_failure: bool,
    /// Also write the JUnit report here.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// Directory for the timestamped reports.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub reports: PathBuf,
    /// The journal file (default: reports/chaos-ENV.journal).
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Output on stdout.
    #[arg(long, value_enum, default_value_t = Format::Pretty)]
    pub format: Format,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

/// `gates chaos --fault`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultArg {
    /// The host's VMs of the environment lose power (hard stop).
    Power,
    /// The host's VMs of the environment keep running, cut off the network.
    Partition,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    pub env: String,
    /// The journal file (default: reports/chaos-ENV.journal).
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Directory the chaos run wrote to (for the default journal path).
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub reports: PathBuf,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The environment (a file name under gates/environments without .yaml); with `--all` or
    /// `--envs`, the one word given is the filter.
    #[arg(required_unless_present_any = ["all", "envs"])]
    pub env: Option<String>,
    /// Run only trials whose name contains this (libtest filter).
    pub filter: Option<String>,
    /// Check every environment of the configuration (a fleet run: one JUnit, JSON and HTML
    /// summary over all, the exit code the worst of them).
    #[arg(long, conflicts_with = "envs")]
    pub all: bool,
    /// Check the environments this file names, one per line (`#` comments), as `--all` does.
    #[arg(long, value_name = "FILE")]
    pub envs: Option<PathBuf>,
    /// At most this many environments at once in a fleet run.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: u16,
    /// Read the state from kubectl output instead of the cluster (repeatable).
    #[arg(long, value_name = "FILE")]
    pub snapshot: Vec<PathBuf>,
    /// Also evaluate the gates on this GitOps repository checkout (overrides `repo.path`).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// Also write the JUnit report here.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// Also write the repository and drift trials here as SARIF 2.1.0, for code scanning
    /// (a failure at the file and line that breaks the gate).
    #[arg(long, value_name = "PATH")]
    pub sarif: Option<PathBuf>,
    /// Directory for the timestamped JUnit and JSON reports.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub reports: PathBuf,
    /// Output on stdout.
    #[arg(long, value_enum, default_value_t = Format::Pretty)]
    pub format: Format,
    /// List the trials without collecting anything.
    #[arg(long)]
    pub list: bool,
    /// Match the filter exactly.
    #[arg(long)]
    pub exact: bool,
    /// Skip trials whose name contains this (repeatable).
    #[arg(long, value_name = "FILTER")]
    pub skip: Vec<String>,
    /// Colour on the terminal.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    /// One character per trial.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// Promotion: every gate of ENV must pass; a skipped trial or gate exits 1, naming it.
    #[arg(long)]
    pub require_all: bool,
    /// Also write the verdicts into the cluster checked, as the ClusterPolicyReport
    /// `gates-ENV` (wgpolicyk8s.io/v1alpha2), replacing the last run's.
    #[arg(long, conflicts_with = "snapshot")]
    pub policy_report: bool,
}

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// The environment.
    pub env: String,
    /// Predict only the loss of this Proxmox host.
    #[arg(long, value_name = "NAME", conflicts_with = "domain")]
    pub host: Option<String>,
    /// Predict the loss of a failure domain beyond a host: `switch:NAME` or `power:NAME`
    /// (every host `proxmox.hosts` puts behind it), or `datastore:STORAGE` (every VM with a
    /// disk on that shared storage).
    #[arg(long, value_name = "KIND:NAME")]
    pub domain: Option<String>,
    /// The fault to predict: `power` (the host's VMs stop) or `partition` (they keep running,
    /// cut off the network, as `gates chaos --fault partition` does).
    #[arg(long, value_enum, default_value_t = FaultArg::Power, conflicts_with = "domain")]
    pub fault: FaultArg,
    /// Read the state from kubectl output instead of the cluster (repeatable).
    #[arg(long, value_name = "FILE")]
    pub snapshot: Vec<PathBuf>,
    /// Output on stdout.
    #[arg(long, value_enum, default_value_t = Format::Pretty)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct GuardArgs {
    /// The environment.
    pub env: String,
    /// Give up after this long (exit 1, naming what was still not steady).
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub timeout: std::time::Duration,
    /// Read the cluster again after this long.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub interval: std::time::Duration,
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The environment whose cluster to read.
    pub env: String,
    /// Where to write the snapshot (JSON, a v1 List).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Write the file even when a part could not be read (the missing parts are recorded).
    #[arg(long)]
    pub allow_incomplete: bool,
}

impl From<&ChaosArgs> for gates_engine::chaos::ChaosOptions {
    fn from(args: &ChaosArgs) -> Self {
        gates_engine::chaos::ChaosOptions {
            host: args.host.clone(),
            dry_run: args.dry_run,
            yes: args.yes,
            whole_host: args.whole_host,
            fault: match args.fault {
                FaultArg::Power => gates_engine::chaos::journal::FaultKind::Power,
                FaultArg::Partition => gates_engine::chaos::journal::FaultKind::Partition,
            },
            expect_failure: args.expect_failure,
            junit: args.junit.clone(),
            reports: args.reports.clone(),
            journal: args.journal.clone(),
        }
    }
}

impl From<&RecoverArgs> for gates_engine::chaos::RecoverOptions {
    fn from(args: &RecoverArgs) -> Self {
        gates_engine::chaos::RecoverOptions {
            journal: args.journal.clone(),
            reports: args.reports.clone(),
        }
    }
}

impl From<&MetricsArgs> for crate::output::report::outputs::MetricsOptions {
    fn from(args: &MetricsArgs) -> Self {
        crate::output::report::outputs::MetricsOptions {
            file: args.metrics.clone(),
            pushgateway: args.pushgateway.clone(),
        }
    }
}

impl From<&CheckArgs> for gates_engine::check::CheckOptions {
    fn from(args: &CheckArgs) -> Self {
        gates_engine::check::CheckOptions {
            env: args.env.clone().unwrap_or_default(),
            filter: args.filter.clone(),
            exact: args.exact,
            skip: args.skip.clone(),
            snapshots: args.snapshot.clone(),
            repo: args.repo.clone(),
            reports: args.reports.clone(),
            require_all: args.require_all,
            long_lived: false,
        }
    }
}
