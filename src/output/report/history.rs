//! `gates history ENV`: what the reports directory remembers about an environment. Per gate,
//! the verdicts of the last N check runs; per chaos host, the last N chaos runs with each
//! probe's longest outage and the recovery time, and whether those are getting worse. Nightly
//! chaos runs are only worth their risk if someone notices recovery creeping up.
//!
//! Reading is separate from judging: [`read`] gathers the reports, [`History::of`] is pure.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::read_back;
use gates_core::record::chaos::ChaosRecord;
use gates_core::record::check::CheckRecord;
use gates_core::record::seconds::rounded;

/// Reports found for one environment, oldest first, and the files that could not be read.
#[derive(Debug, Default)]
pub struct Found {
    pub checks: Vec<(PathBuf, CheckRecord)>,
    pub chaos: Vec<(PathBuf, ChaosRecord)>,
    pub unreadable: Vec<String>,
}

/// `20261129T201500Z` after the prefix and before `.json`: the stamp alone, so `lab-production-…`
/// is not read for `lab` and `.timeline.json` is not read as a report. A second run in the
/// same second wrote `…Z-2` (see [`super::unique`]); its stamp keeps the sequence number.
pub fn stamp_of<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let full = name.strip_prefix(prefix)?.strip_suffix(".json")?;
    let (stamp, sequence) = super::unique::stamp_and_sequence(full);
    let numbered_right = (sequence == 1 && stamp == full) || full == format!("{stamp}-{sequence}");
    let ok = numbered_right
        && stamp.len() == 16
        && stamp.ends_with('Z')
        && stamp.as_bytes()[8] == b'T'
        && stamp
            .bytes()
            .enumerate()
            .all(|(i, b)| i == 8 || i == 15 || b.is_ascii_digit());
    ok.then_some(full)
}

/// The order of reports in time: the stamp, then the same-second sequence number.
fn time_key(stamp: &str) -> (&str, u32) {
    super::unique::stamp_and_sequence(stamp)
}

/// The reports directory could not be listed.
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot read the reports directory: {source} (pass --reports DIR)", dir.display())]
pub struct ReportsDirUnreadable {
    pub dir: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Every check and chaos report of `environment` under `dir`, oldest first.
pub fn read(dir: &Path, environment: &str) -> Result<Found, ReportsDirUnreadable> {
    let entries = fs::read_dir(dir).map_err(|source| ReportsDirUnreadable {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    // The stamp sorts by time; check and chaos files are kept apart below.
    names.sort_by(|a, b| {
        let key = |n: &str| {
            stamp_of(n, &format!("{environment}-"))
                .or_else(|| stamp_of(n, &format!("chaos-{environment}-")))
                .map(|s| {
                    let (stamp, sequence) = time_key(s);
                    (stamp.to_string(), sequence)
                })
        };
        key(a).cmp(&key(b)).then(a.cmp(b))
    });
    let mut found = Found::default();
    for name in names {
        let path = dir.join(&name);
        if stamp_of(&name, &format!("{environment}-")).is_some() {
            match read_back::parse::<CheckRecord>(&path) {
                Ok(view) => found.checks.push((path, view)),
                Err(err) => found.unreadable.push(err),
            }
        } else if stamp_of(&name, &format!("chaos-{environment}-")).is_some() {
            match read_back::parse::<ChaosRecord>(&path) {
                Ok(view) => found.chaos.push((path, view)),
                Err(err) => found.unreadable.push(err),
            }
        }
    }
    Ok(found)
}

/// Whether the newest value moved away from the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trend {
    /// Higher than the median of the earlier runs (for outages and recovery: worse).
    Rising,
    Falling,
    Steady,
    /// Fewer than two runs measured it.
    TooFew,
}

impl Trend {
    pub fn word(self) -> &'static str {
        match self {
            Trend::Rising => "rising",
            Trend::Falling => "falling",
            Trend::Steady => "steady",
            Trend::TooFew => "too few runs",
        }
    }
}

/// The newest value against the median of the earlier ones: a change of more than 10 % and
/// more than half a second is a trend; less is noise at a 500 ms sample interval.
pub fn trend(values: &[f64]) -> Trend {
    let Some((newest, earlier)) = values.split_last() else {
        return Trend::TooFew;
    };
    if earlier.is_empty() {
        return Trend::TooFew;
    }
    let mut sorted = earlier.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median = if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    };
    let change = newest - median;
    if change.abs() <= 0.5 || change.abs() <= 0.1 * median.abs() {
        Trend::Steady
    } else if change > 0.0 {
        Trend::Rising
    } else {
        Trend::Falling
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub environment: String,
    pub last: usize,
    pub gates: Vec<GateHistory>,
    pub chaos: Vec<HostHistory>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateHistory {
    pub gate: u32,
    pub title: String,
    /// Oldest first.
    pub results: Vec<GateResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateResult {
    pub at: String,
    pub verdict: String,
    pub file: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostHistory {
    pub host: String,
    /// Oldest first.
    pub runs: Vec<ChaosRun>,
    /// Per probe, the trend of its longest outage.
    pub outage_trend: BTreeMap<String, Trend>,
    pub recovery_trend: Trend,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChaosRun {
    pub at: String,
    pub verdict: String,
    /// Seconds from the restore until recovery; absent when recovery was not seen.
    pub recovery_seconds: Option<f64>,
    /// Per probe: longest and total outage, seconds.
    pub outages: BTreeMap<String, Outage>,
    pub file: String,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Outage {
    pub longest: f64,
    pub total: f64,
}

/// When a check report's run started, as its file writes it (`2026-12-01T13:58:07.123Z`).
pub fn started_at(record: &CheckRecord) -> String {
    match serde_json::to_value(record.started_at) {
        Ok(serde_json::Value::String(text)) => text,
        _ => record.started_at.to_rfc3339(),
    }
}

impl History {
    /// The last `last` results per gate and per chaos host.
    pub fn of(environment: &str, found: &Found, last: usize) -> History {
        let mut gates: BTreeMap<u32, GateHistory> = BTreeMap::new();
        for (path, check) in &found.checks {
            for gate in &check.gates {
                let entry = gates.entry(gate.gate).or_insert_with(|| GateHistory {
                    gate: gate.gate,
                    title: gate.title.clone(),
                    results: Vec::new(),
                });
                // The newest report's title wins.
                entry.title = gate.title.clone();
                entry.results.push(GateResult {
                    at: started_at(check),
                    verdict: gate.verdict.as_str().to_string(),
                    file: path.display().to_string(),
                });
            }
        }
        let mut gates: Vec<GateHistory> = gates.into_values().collect();
        for gate in &mut gates {
            keep_last(&mut gate.results, last);
        }

        let mut hosts: BTreeMap<String, Vec<ChaosRun>> = BTreeMap::new();
        for (path, report) in &found.chaos {
            hosts
                .entry(report.host.clone())
                .or_default()
                .push(ChaosRun {
                    at: report.started_at.clone(),
                    verdict: report.verdict.as_str().to_string(),
                    recovery_seconds: report.recovery_seconds(),
                    outages: report
                        .probes
                        .iter()
                        .map(|p| {
                            (
                                p.probe.clone(),
                                Outage {
                                    longest: rounded(p.longest),
                                    total: rounded(p.total),
                                },
                            )
                        })
                        .collect(),
                    file: path.display().to_string(),
                });
        }
        let chaos = hosts
            .into_iter()
            .map(|(host, mut runs)| {
                keep_last(&mut runs, last);
                let probes: Vec<String> = runs
                    .iter()
                    .flat_map(|r| r.outages.keys().cloned())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let outage_trend = probes
                    .into_iter()
                    .map(|probe| {
                        let values: Vec<f64> = runs
                            .iter()
                            .filter_map(|r| r.outages.get(&probe).map(|o| o.longest))
                            .collect();
                        (probe, trend(&values))
                    })
                    .collect();
                let recoveries: Vec<f64> = runs.iter().filter_map(|r| r.recovery_seconds).collect();
                HostHistory {
                    host,
                    recovery_trend: trend(&recoveries),
                    outage_trend,
                    runs,
                }
            })
            .collect();
        History {
            environment: environment.to_string(),
            last,
            gates,
            chaos,
        }
    }

    pub fn render_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    pub fn render_text(&self) -> String {
        let mut out = format!(
            "History of {} (last {} runs, oldest first)\n",
            self.environment, self.last
        );
        if self.gates.is_empty() {
            out.push_str("\nNo check reports.\n");
        } else {
            out.push_str("\nGates:\n");
            for gate in &self.gates {
                let verdicts: Vec<&str> = gate.results.iter().map(|r| word(&r.verdict)).collect();
                let _ = writeln!(
                    out,
                    "  gate {}  {}  {}",
                    gate.gate,
                    verdicts.join(" "),
                    gate.title
                );
            }
            if let Some(span) = self
                .gates
                .first()
                .and_then(|g| Some((g.results.first()?.at.clone(), g.results.last()?.at.clone())))
            {
                let _ = writeln!(out, "  from {} to {}", span.0, span.1);
            }
        }
        if self.chaos.is_empty() {
            out.push_str("\nNo chaos reports.\n");
            return out;
        }
        for host in &self.chaos {
            let families = families(host);
            let _ = writeln!(out, "\nChaos on host {}:", host.host);
            let mut header = format!("  {:<24} {:<6}", "started", "result");
            for family in &families {
                let _ = write!(header, " {family:>10}");
            }
            let _ = writeln!(out, "{header} {:>10}", "recovery");
            for run in &host.runs {
                let mut line = format!("  {:<24} {:<6}", run.at, word(&run.verdict));
                for family in &families {
                    let cell =
                        family_longest(run, family).map_or("-".to_string(), |s| format!("{s:.1}s"));
                    let _ = write!(line, " {cell:>10}");
                }
                let recovery = run
                    .recovery_seconds
                    .map_or("not seen".to_string(), |s| format!("{s:.1}s"));
                let _ = writeln!(out, "{line} {recovery:>10}");
            }
            let trends: Vec<String> = families
                .iter()
                .map(|family| {
                    let values: Vec<f64> = host
                        .runs
                        .iter()
                        .filter_map(|r| family_longest(r, family))
                        .collect();
                    format!("{family} outage {}", trend(&values).word())
                })
                .collect();
            let _ = writeln!(
                out,
                "  trend: recovery {}; {}",
                host.recovery_trend.word(),
                trends.join(", ")
            );
        }
        out.push_str(
            "\nOutage columns: the longest outage of any probe of that kind (api: the VIP probes, \
             ingress: every URL, workloads: every controller); --format json has each probe.\n",
        );
        out
    }
}

fn keep_last<T>(items: &mut Vec<T>, last: usize) {
    if items.len() > last {
        items.drain(..items.len() - last);
    }
}

fn word(verdict: &str) -> &str {
    match verdict {
        "pass" => "pass",
        "fail" => "FAIL",
        "error" => "ERROR",
        "skip" => "skip",
        other => other,
    }
}

/// The kind of a probe, one column in the text: `api-vip-kept-alive` → `api`,
/// `ingress::whoami.lab` → `ingress`, `workloads::coredns` → `workloads`, `etcd-quorum` → `etcd`.
fn family(probe: &str) -> &str {
    let head = probe.split("::").next().unwrap_or(probe);
    head.split('-').next().unwrap_or(head)
}

/// The probe kinds a host's runs measured, in a stable order.
fn families(host: &HostHistory) -> Vec<String> {
    let mut all: Vec<String> = host
        .runs
        .iter()
        .flat_map(|r| r.outages.keys().map(|p| family(p).to_string()))
        .collect();
    all.sort();
    all.dedup();
    all
}

/// The longest outage of any probe of a kind in one run.
fn family_longest(run: &ChaosRun, kind: &str) -> Option<f64> {
    run.outages
        .iter()
        .filter(|(probe, _)| family(probe) == kind)
        .map(|(_, o)| o.longest)
        .reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped reports of an earlier gates (no `schema_version`) still read; a report a
    /// newer gates wrote is named as unreadable with its version, the others still count.
    #[test]
    fn reports_without_a_version_read_and_a_newer_ones_is_refused_by_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/reports/lab-20261201T101742Z.json");
        let old = fs::read_to_string(&fixtures).unwrap();
        assert!(
            !old.contains("schema_version"),
            "the fixture predates versions"
        );
        fs::write(dir.path().join("lab-20261201T101742Z.json"), &old).unwrap();
        let newer = old.replacen('{', r#"{"schema_version": 7,"#, 1);
        fs::write(dir.path().join("lab-20261202T101742Z.json"), newer).unwrap();
        let found = read(dir.path(), "lab").unwrap();
        assert_eq!(found.checks.len(), 1, "{:?}", found.unreadable);
        assert_eq!(found.unreadable.len(), 1);
        let said = &found.unreadable[0];
        assert!(said.contains("lab-20261202T101742Z.json"), "{said}");
        assert!(
            said.contains("schema_version 7; this gates reads up to 1"),
            "{said}"
        );
    }

    #[test]
    fn a_newest_value_well_above_the_earlier_median_is_rising() {
        assert_eq!(trend(&[30.0, 31.0, 29.0, 45.0]), Trend::Rising);
        assert_eq!(trend(&[30.0, 31.0, 29.0, 20.0]), Trend::Falling);
    }

    #[test]
    fn small_changes_and_single_runs_are_not_a_trend() {
        assert_eq!(trend(&[30.0, 31.0, 32.0]), Trend::Steady);
        assert_eq!(trend(&[0.0, 0.0, 0.4]), Trend::Steady);
        assert_eq!(trend(&[12.0]), Trend::TooFew);
        assert_eq!(trend(&[]), Trend::TooFew);
    }

    #[test]
    fn probes_group_into_kinds_for_the_text_columns() {
        assert_eq!(family("api-vip-kept-alive"), "api");
        assert_eq!(family("ingress::whoami.lab.internal"), "ingress");
        assert_eq!(family("workloads::longhorn-csi-attacher"), "workloads");
        assert_eq!(family("etcd-quorum"), "etcd");
    }

    #[test]
    fn only_stamped_json_reports_of_the_environment_itself_count() {
        assert_eq!(
            stamp_of("lab-20261129T201500Z.json", "lab-"),
            Some("20261129T201500Z")
        );
        assert_eq!(
            stamp_of("lab-production-20261129T201500Z.json", "lab-"),
            None
        );
        assert_eq!(
            stamp_of("chaos-lab-20261129T201500Z.timeline.json", "chaos-lab-"),
            None
        );
        assert_eq!(stamp_of("lab-20261129T201500Z.xml", "lab-"), None);
    }

    #[test]
    fn a_second_report_in_the_same_second_counts_and_sorts_after_the_first() {
        assert_eq!(
            stamp_of("chaos-lab-20261129T201500Z-2.json", "chaos-lab-"),
            Some("20261129T201500Z-2")
        );
        assert_eq!(stamp_of("lab-20261129T201500Z-1.json", "lab-"), None);
        assert_eq!(stamp_of("lab-20261129T201500Z-x.json", "lab-"), None);
        assert!(time_key("20261129T201500Z-10") > time_key("20261129T201500Z-2"));
        assert!(time_key("20261129T201500Z-2") > time_key("20261129T201500Z"));
        assert!(time_key("20261129T201501Z") > time_key("20261129T201500Z-9"));
    }
}
