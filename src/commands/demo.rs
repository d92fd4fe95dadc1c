//! `gates lab` and `gates demo`: the built-in lab as a place to try gates without a cluster.
//! The lab runs in this process, but the harness reaches it only over its protocols, with
//! the kubeconfig, talosconfig, token and environment files the lab writes, exactly as it
//! reaches real infrastructure.

use gates_core::exit::ExitCode;
use std::path::{Path, PathBuf};

use gates_lab::addr::{DEFAULT_SUBNET, SubnetChoice};
use gates_lab::{Lab, LabOptions};

use crate::cli::{ChaosArgs, CheckArgs, Color, DemoArgs, Format, LabArgs};
use crate::config::Config;
use crate::error::AppError;
use crate::streams::Streams;

/// `gates lab`: run until Ctrl-C.
pub async fn lab(args: LabArgs) -> Result<ExitCode, AppError> {
    // The simulator's own binary speaks in bare numbers: 0 stopped cleanly, else it could not run.
    Ok(match gates_lab::cli::run("gates lab", &args).await {
        0 => ExitCode::Passed,
        _ => ExitCode::CannotTell,
    })
}

/// `gates demo`: lab, check both environments, chaos on the staging-like one, reports.
pub async fn demo(
    config_dir: &Path,
    args: DemoArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let work = tempfile::tempdir().map_err(AppError::file(
        &std::env::temp_dir(),
        "create a temporary directory in",
    ))?;
    let env_dir = work.path().join("environments");
    let lab = start("adr-007", args.speed, args.subnet, work.path(), &env_dir).await?;
    streams.say(format_args!(
        "gates demo: lab started (scenario adr-007, speed {}, 127.{}.x.y{})",
        args.speed,
        lab.plan.subnet,
        gates_lab::cli::moved(DEFAULT_SUBNET, args.subnet, lab.plan.subnet)
    ));
    let result = run_demo(config_dir, &env_dir, &args, streams).await;
    let _ = lab.save_ground_truth();
    lab.stop().await;
    let (codes, reports) = result?;
    streams.say("");
    streams.say("gates demo: reports written:");
    for path in &reports {
        streams.say(format_args!("  {}", path.display()));
    }
    Ok(codes.into_iter().fold(ExitCode::Passed, ExitCode::worst))
}

async fn run_demo(
    config_dir: &Path,
    env_dir: &Path,
    args: &DemoArgs,
    streams: &mut Streams,
) -> Result<(Vec<ExitCode>, Vec<PathBuf>), AppError> {
    let config = Config::load(config_dir, &[env_dir.to_path_buf()])?;
    let mut codes = Vec::new();
    for env_name in ["lab", "lab-production"] {
        let env = config.environment(env_name)?;
        streams.println(format_args!(
            "\n== gates check {env_name} ({})",
            env.description
        ));
        let check = CheckArgs {
            env: Some(env_name.to_string()),
            filter: None,
            all: false,
            envs: None,
            jobs: 1,
            snapshot: Vec::new(),
            repo: None,
            junit: None,
            sarif: None,
            reports: args.reports.clone(),
            format: Format::Pretty,
            list: false,
            exact: false,
            skip: Vec::new(),
            color: Color::Auto,
            quiet: false,
            metrics: Default::default(),
            require_all: false,
            policy_report: false,
        };
        codes.push(crate::commands::check::run(&config, config_dir, check, streams).await?);
    }
    if !args.no_chaos {
        let env = config.environment("lab")?;
        streams.println("\n== gates chaos lab --host worst");
        let chaos = ChaosArgs {
            env: "lab".to_string(),
            host: "worst".to_string(),
            dry_run: false,
            yes: false,
            whole_host: false,
            fault: crate::cli::FaultArg::Power,
            expect_failure: false,
            junit: None,
            reports: args.reports.clone(),
            journal: None,
            format: Format::Pretty,
            metrics: Default::default(),
        };
        codes.push(crate::commands::chaos::experiment(&config, env, &chaos, streams).await?);
    }
    Ok((codes, report_files(&args.reports)))
}

async fn start(
    scenario: &str,
    speed: f64,
    subnet: Option<u8>,
    state_dir: &Path,
    env_dir: &Path,
) -> Result<Lab, AppError> {
    let options = LabOptions {
        scenario: scenario.to_string(),
        subnet: subnet.unwrap_or(DEFAULT_SUBNET),
        subnet_choice: match subnet {
            Some(_) => SubnetChoice::Exactly,
            None => SubnetChoice::FirstFree,
        },
        speed,
        state_dir: state_dir.to_path_buf(),
        env_dir: Some(env_dir.to_path_buf()),
        ..LabOptions::default()
    };
    Lab::start(options)
        .await
        .map_err(|source| AppError::Lab { source })
}

/// The reports of this run: the newest file per environment and kind.
fn report_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    let mut newest: std::collections::BTreeMap<String, PathBuf> = std::collections::BTreeMap::new();
    for file in files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // `chaos-lab-20261129T202245Z.timeline.json` → `chaos-lab` + `.timeline.json`.
        let Some((stem, stamped)) = name.rsplit_once('-') else {
            continue;
        };
        if !(stem == "lab" || stem == "lab-production" || stem == "chaos-lab") {
            continue;
        }
        let suffix = stamped.find('.').map_or("", |i| &stamped[i..]);
        newest.insert(format!("{stem}{suffix}"), file);
    }
    newest.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn demo_writes_each_environments_heading_to_out_and_the_reports_it_wrote_to_err() {
        let dir = tempfile::tempdir().unwrap();
        let args = DemoArgs {
            speed: 20.0,
            subnet: None,
            reports: dir.path().to_path_buf(),
            no_chaos: true,
        };
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("gates");
        let (mut streams, said) = Streams::captured();
        demo(&config, args, &mut streams)
            .await
            .expect("the demo runs");
        let out = said.out();
        let lab = out.find("\n== gates check lab (").expect(&out);
        let production = out.find("\n== gates check lab-production (").expect(&out);
        assert!(lab < production, "{out}");
        assert!(!out.contains("== gates chaos"), "--no-chaos: {out}");
        let err = said.err();
        let started = err.lines().next().unwrap_or_default();
        assert!(
            started.starts_with("gates demo: lab started (scenario adr-007, speed 20, 127.")
                && started.contains(".x.y"),
            "{err}"
        );
        let listed = err
            .split("gates demo: reports written:\n")
            .nth(1)
            .expect(&err);
        let reports = dir.path().display().to_string();
        assert!(
            listed.lines().count() >= 6
                && listed.lines().all(|l| l.trim_start().starts_with(&reports)),
            "{listed}"
        );
    }
}
