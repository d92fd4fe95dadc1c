//! Where a run's metrics go: the `--metrics` file and the `--pushgateway` group. For a chaos
//! run they are drawn from the JSON report the run just wrote, found by its timestamp, so the
//! chaos step itself needs no hook for them.

use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::history::stamp_of;
use super::read_back;

/// Why a run's metrics were not written or pushed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{}: cannot {doing}: {source}", path.display())]
    Write {
        path: PathBuf,
        doing: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Push(#[from] super::pushgateway::PushError),
    /// The chaos report the metrics are drawn from could not be read back.
    #[error("{0}")]
    ChaosReport(String),
}

/// Where a run's metrics go besides its reports (`--metrics`, `--pushgateway`).
#[derive(Debug, Clone, Default)]
pub struct MetricsOptions {
    /// An OpenMetrics text file, e.g. for node_exporter's textfile collector.
    pub file: Option<PathBuf>,
    /// A Prometheus Pushgateway's URL.
    pub pushgateway: Option<String>,
}

/// Write and push `text` as `--metrics`/`--pushgateway` ask; says on stderr what it did.
pub async fn emit(
    said: &mut (dyn std::io::Write + Send),
    args: &MetricsOptions,
    command: &str,
    environment: &str,
    text: &str,
) -> Result<(), OutputError> {
    if let Some(path) = &args.file {
        write_atomically(path, text)?;
        let _ = writeln!(said, "metrics: {}", path.display());
    }
    if let Some(url) = &args.pushgateway {
        super::pushgateway::push(
            url,
            &[
                ("job", "gates"),
                ("environment", environment),
                ("command", command),
            ],
            text.to_string(),
        )
        .await?;
        let _ = writeln!(said, "metrics pushed: {url}");
    }
    Ok(())
}

/// A fleet run's metrics: the file holds every environment's (`metrics::fleet`); each
/// environment is pushed to its own Pushgateway group, so one environment's push replaces
/// only its own series.
pub async fn emit_fleet(
    said: &mut (dyn std::io::Write + Send),
    args: &MetricsOptions,
    fleet: &gates_engine::record::FleetRecord,
) -> Result<(), OutputError> {
    if let Some(path) = &args.file {
        write_atomically(path, &super::metrics::fleet(fleet))?;
        let _ = writeln!(said, "metrics: {}", path.display());
    }
    if let Some(url) = &args.pushgateway {
        for member in &fleet.environments {
            let text = super::metrics::fleet_member(member);
            super::pushgateway::push(
                url,
                &[
                    ("job", "gates"),
                    ("environment", &member.environment),
                    ("command", "check"),
                ],
                text,
            )
            .await?;
        }
        let _ = writeln!(
            said,
            "metrics pushed: {url} ({} groups)",
            fleet.environments.len()
        );
    }
    Ok(())
}

/// The textfile collector may read at any moment: write beside, then rename over.
fn write_atomically(path: &Path, text: &str) -> Result<(), OutputError> {
    let failed = |path: &Path, doing| {
        let path = path.to_path_buf();
        move |source| OutputError::Write {
            path,
            doing,
            source,
        }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(failed(dir, "create the directory"))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, text).map_err(failed(&tmp, "write"))?;
    fs::rename(&tmp, path).map_err(failed(path, "write"))
}

/// The stem of the chaos report of `environment` written at or after `since`, if any.
pub fn chaos_report_since(dir: &Path, environment: &str, since: DateTime<Utc>) -> Option<PathBuf> {
    let prefix = format!("chaos-{environment}-");
    let floor = since.format("%Y%m%dT%H%M%SZ").to_string();
    let newest = fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|name| stamp_of(&name, &prefix).map(str::to_string))
        .filter(|stamp| *stamp >= floor)
        .max()?;
    Some(dir.join(format!("{prefix}{newest}")))
}

/// Metrics of the chaos run that wrote its report since `since`; none when it wrote none
/// (a dry run, or refused before the plan).
pub async fn after_chaos(
    said: &mut (dyn std::io::Write + Send),
    args: &MetricsOptions,
    reports: &Path,
    environment: &str,
    since: DateTime<Utc>,
) -> Result<(), OutputError> {
    if args.file.is_none() && args.pushgateway.is_none() {
        return Ok(());
    }
    let Some(stem) = chaos_report_since(reports, environment, since) else {
        let _ = writeln!(said, "metrics: none, the run wrote no chaos report");
        return Ok(());
    };
    let (report, _) = read_back::chaos(&stem).map_err(OutputError::ChaosReport)?;
    emit(
        said,
        args,
        "chaos",
        environment,
        &super::metrics::chaos(&report),
    )
    .await
}
