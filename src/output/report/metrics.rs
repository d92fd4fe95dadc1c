//! Metrics for dashboards: a run as OpenMetrics text, for the node_exporter textfile collector
//! (`--metrics PATH`) or a Pushgateway (`--pushgateway URL`).
//!
//! Only gauges, with `# HELP` and `# TYPE`, no timestamps, and `# EOF` at the end: that subset
//! is valid OpenMetrics and also valid for the classic text format node_exporter and the
//! Pushgateway parse (where `# EOF` is a comment). A verdict is four series, one per verdict,
//! with 1 on the one reached (the kube-state-metrics way of exposing a state), so a dashboard
//! can count failing gates with `sum(gates_gate_verdict{verdict="fail"})`. A value the run did
//! not measure (recovery never seen) is left out, never written as zero.

use std::fmt::Write as _;

use crate::output::report::Run;
use crate::verdict::Verdict;
use gates_core::record::chaos::ChaosRecord;
use gates_core::record::seconds::rounded;
use gates_engine::record::{FleetMember, FleetRecord, MemberOutcome};

const VERDICTS: [&str; 4] = ["pass", "fail", "error", "skip"];

/// One metric family: its samples share a name, a help text and a type.
#[derive(Debug, Clone)]
struct Family {
    name: &'static str,
    help: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

/// The families of one exposition, in the order first used.
#[derive(Debug, Default)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    fn gauge(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: Vec<(&'static str, String)>,
        value: f64,
    ) {
        let index = match self.families.iter().position(|f| f.name == name) {
            Some(index) => index,
            None => {
                self.families.push(Family {
                    name,
                    help,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        self.families[index].samples.push((labels, value));
    }

    /// One series per verdict, 1 on the one reached.
    fn verdict(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&'static str, String)],
        reached: &str,
    ) {
        for verdict in VERDICTS {
            let mut all = labels.to_vec();
            all.push(("verdict", verdict.to_string()));
            self.gauge(name, help, all, f64::from(u8::from(verdict == reached)));
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for family in &self.families {
            let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(family.help));
            let _ = writeln!(out, "# TYPE {} gauge", family.name);
            for (labels, value) in &family.samples {
                out.push_str(family.name);
                if !labels.is_empty() {
                    let pairs: Vec<String> = labels
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                        .collect();
                    let _ = write!(out, "{{{}}}", pairs.join(","));
                }
                let _ = writeln!(out, " {}", number(*value));
            }
        }
        out.push_str("# EOF\n");
        out
    }
}

/// Label values escape backslash, double quote and newline.
pub fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Integers without a fraction, others to the millisecond.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The metrics of a `gates check` run.
pub fn check(run: &Run) -> String {
    let mut m = Exposition::default();
    check_into(&mut m, run);
    m.render()
}

/// The metrics `gates watch` serves: its newest evaluation's, as a `check` run gives them,
/// and for each source whether it is current, since when it has not been, and when it last
/// was (a dashboard alerts on a source broken for long, before its trials turn to errors).
/// With `--policy-report`, `writes`: whether the report's last write succeeded (left out
/// before the first is tried) and how many did and did not, since a report that silently
/// stops being written looks to its readers like verdicts that stopped changing.
pub fn watch(
    published: Option<&gates_engine::watch::Published>,
    writes: Option<&gates_engine::watch::policy_report::WriteStatus>,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let mut m = Exposition::default();
    m.gauge(
        "gates_watch_ready",
        "1 once every source's first whole read is in, 0 before.",
        Vec::new(),
        f64::from(u8::from(published.is_some_and(|p| p.ready))),
    );
    if let Some(writes) = writes {
        if let Some(up) = writes.up {
            m.gauge(
                "gates_watch_policy_report_up",
                "1 when the last write of the ClusterPolicyReport succeeded, 0 when it failed (the terminal says why).",
                Vec::new(),
                f64::from(u8::from(up)),
            );
        }
        for (result, count) in [("written", writes.written), ("failed", writes.failed)] {
            m.gauge(
                "gates_watch_policy_report_writes",
                "Writes of the ClusterPolicyReport since the watch started, by result (one after each evaluation that changed a verdict or message, and each retry while failing).",
                vec![("result", result.to_string())],
                count as f64,
            );
        }
    }
    let Some(published) = published else {
        return m.render();
    };
    let source = |s: &gates_engine::watch::SourceHealth| vec![("source", s.source.clone())];
    for s in &published.sources {
        m.gauge(
            "gates_watch_source_up",
            "1 while the source is read (its watch open, its last poll answered), 0 while it is not.",
            source(s),
            f64::from(u8::from(s.health.read && s.health.broken.is_none())),
        );
    }
    for s in &published.sources {
        let broken = s.health.broken.as_ref().map_or(0.0, |(since, _)| {
            (now - *since).to_std().unwrap_or_default().as_secs_f64()
        });
        m.gauge(
            "gates_watch_source_unread_seconds",
            "How long the source has not been readable (0 while it is); past --stale-after its trials are errors.",
            source(s),
            broken,
        );
    }
    for s in &published.sources {
        if let Some(at) = s.health.current_at {
            m.gauge(
                "gates_watch_source_current_timestamp_seconds",
                "When the source was last known current (a list, a watch event or bookmark, a poll), as a Unix time.",
                source(s),
                at.timestamp_millis() as f64 / 1000.0,
            );
        }
    }
    for s in &published.sources {
        m.gauge(
            "gates_watch_source_reads",
            "Whole reads of the source since the watch started: a kind is listed once, then again after each 410 Gone; a polled source once per interval.",
            source(s),
            s.health.reads as f64,
        );
    }
    m.gauge(
        "gates_watch_evaluation_timestamp_seconds",
        "When the newest evaluation was made, as a Unix time.",
        vec![("environment", published.record.environment.clone())],
        published.at.timestamp_millis() as f64 / 1000.0,
    );
    check_into(&mut m, &published.record);
    m.render()
}

/// The metrics of a fleet run: each judged environment's as its own run gives them (every
/// series labelled by its environment), in one exposition, and for every environment whether
/// it could be checked at all, so one that could not does not vanish from a dashboard.
pub fn fleet(fleet: &FleetRecord) -> String {
    let mut m = Exposition::default();
    for member in &fleet.environments {
        refused_into(&mut m, member);
    }
    for record in fleet.environments.iter().filter_map(|m| m.record()) {
        check_into(&mut m, record);
    }
    m.render()
}

/// One environment of a fleet run alone (its Pushgateway group).
pub fn fleet_member(member: &FleetMember) -> String {
    let mut m = Exposition::default();
    refused_into(&mut m, member);
    if let Some(record) = member.record() {
        check_into(&mut m, record);
    }
    m.render()
}

fn refused_into(m: &mut Exposition, member: &FleetMember) {
    let refused = matches!(member.outcome, MemberOutcome::Refused { .. });
    m.gauge(
        "gates_check_refused",
        "1 when the environment could not be checked at all in a fleet run (its configuration or repository), 0 otherwise.",
        vec![("environment", member.environment.clone())],
        f64::from(u8::from(refused)),
    );
}

fn check_into(m: &mut Exposition, run: &Run) {
    let env = || ("environment", run.environment.clone());
    let evaluated: f64 = run.trials.iter().map(|t| t.duration.as_secs_f64()).sum();
    m.gauge(
        "gates_check_timestamp_seconds",
        "When the check run started (Unix time).",
        vec![env()],
        run.started_at.timestamp_millis() as f64 / 1000.0,
    );
    m.gauge(
        "gates_check_duration_seconds",
        "How long the check run took to collect and evaluate.",
        vec![env()],
        run.collect_time.as_secs_f64() + evaluated,
    );
    let passing = run
        .gates
        .iter()
        .filter(|g| g.verdict == Verdict::Pass)
        .count();
    m.gauge(
        "gates_rollout_gates_passing",
        "How many of the rollout gates that apply to the environment pass.",
        vec![env(), ("decision", run.decision.clone())],
        passing as f64,
    );
    m.gauge(
        "gates_rollout_gates",
        "How many rollout gates apply to the environment.",
        vec![env(), ("decision", run.decision.clone())],
        run.gates.len() as f64,
    );
    for gate in &run.gates {
        m.verdict(
            "gates_gate_verdict",
            "The verdict of each rollout gate: 1 on the verdict reached.",
            &[
                env(),
                ("decision", run.decision.clone()),
                ("gate", gate.gate.to_string()),
            ],
            gate.verdict.as_str(),
        );
    }
    for trial in &run.trials {
        m.verdict(
            "gates_trial_verdict",
            "The verdict of each trial (one check of one gate): 1 on the verdict reached.",
            &[
                env(),
                ("gate", trial.gate.to_string()),
                ("trial", trial.name.clone()),
            ],
            trial.finding.verdict.as_str(),
        );
    }
    let t = &run.tally;
    for (verdict, count) in [
        ("pass", t.passed),
        ("fail", t.failed),
        ("error", t.errors),
        ("skip", t.skipped),
    ] {
        m.gauge(
            "gates_trials",
            "How many trials reached each verdict.",
            vec![env(), ("verdict", verdict.to_string())],
            count as f64,
        );
    }
}

/// The metrics of a chaos run, from its JSON report.
pub fn chaos(report: &ChaosRecord) -> String {
    let mut m = Exposition::default();
    let base = || {
        vec![
            ("environment", report.environment.clone()),
            ("gate", "4".to_string()),
            ("host", report.host.clone()),
        ]
    };
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(&report.started_at) {
        m.gauge(
            "gates_chaos_timestamp_seconds",
            "When the chaos run started (Unix time).",
            base(),
            at.timestamp_millis() as f64 / 1000.0,
        );
    }
    if let Some(seconds) = report.duration_seconds() {
        m.gauge(
            "gates_chaos_duration_seconds",
            "How long the chaos run took, from preflight to verified recovery.",
            base(),
            seconds,
        );
    }
    if let Some(seconds) = report.recovery_seconds() {
        m.gauge(
            "gates_chaos_recovery_seconds",
            "Seconds from the start of the restore until the cluster had recovered.",
            base(),
            seconds,
        );
    }
    m.verdict(
        "gates_chaos_verdict",
        "The verdict of the chaos run: 1 on the verdict reached.",
        &base(),
        report.verdict.as_str(),
    );
    for trial in &report.trials {
        let mut labels = base();
        labels.push(("trial", trial.name.clone()));
        m.verdict(
            "gates_chaos_trial_verdict",
            "The verdict of each chaos trial: 1 on the verdict reached.",
            &labels,
            trial.finding.verdict.as_str(),
        );
    }
    for probe in &report.probes {
        let labels = || {
            let mut l = base();
            l.push(("probe", probe.probe.clone()));
            l
        };
        m.gauge(
            "gates_chaos_outage_longest_seconds",
            "The longest outage a probe saw.",
            labels(),
            rounded(probe.longest),
        );
        m.gauge(
            "gates_chaos_outage_seconds",
            "All outages a probe saw, added up.",
            labels(),
            rounded(probe.total),
        );
        m.gauge(
            "gates_chaos_outages",
            "How many separate outages a probe saw.",
            labels(),
            probe.outages.len() as f64,
        );
        m.gauge(
            "gates_chaos_unknown_seconds",
            "How long a probe could not tell whether its target was up.",
            labels(),
            probe.unknown_seconds(),
        );
        for (bound, value) in [
            ("longest", rounded(probe.budget_longest)),
            ("total", rounded(probe.budget_total)),
        ] {
            let mut l = labels();
            l.push(("bound", bound.to_string()));
            m.gauge(
                "gates_chaos_outage_budget_seconds",
                "The outage budget of a probe: its longest and its total.",
                l,
                value,
            );
        }
    }
    m.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_quotes_backslashes_and_newlines() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn a_family_is_written_once_with_all_its_samples_and_the_text_ends_with_eof() {
        let mut m = Exposition::default();
        m.gauge("x_seconds", "X.", vec![("a", "1".into())], 1.5);
        m.gauge("y", "Y.", vec![], 2.0);
        m.gauge("x_seconds", "X.", vec![("a", "2".into())], 0.25);
        assert_eq!(
            m.render(),
            "# HELP x_seconds X.\n# TYPE x_seconds gauge\nx_seconds{a=\"1\"} 1.5\n\
             x_seconds{a=\"2\"} 0.25\n# HELP y Y.\n# TYPE y gauge\ny 2\n# EOF\n"
        );
    }

    #[test]
    fn the_policy_report_writes_are_served_only_with_the_flag_and_up_only_once_tried() {
        use gates_engine::watch::policy_report::WriteStatus;
        let now = chrono::Utc::now();
        let without = watch(None, None, now);
        assert!(!without.contains("gates_watch_policy_report"), "{without}");
        let untried = watch(None, Some(&WriteStatus::default()), now);
        assert!(
            !untried.contains("gates_watch_policy_report_up"),
            "{untried}"
        );
        assert!(
            untried.contains("gates_watch_policy_report_writes{result=\"written\"} 0\n"),
            "{untried}"
        );
        let failing = watch(
            None,
            Some(&WriteStatus {
                up: Some(false),
                written: 2,
                failed: 3,
            }),
            now,
        );
        for line in [
            "gates_watch_policy_report_up 0\n",
            "gates_watch_policy_report_writes{result=\"written\"} 2\n",
            "gates_watch_policy_report_writes{result=\"failed\"} 3\n",
        ] {
            assert!(failing.contains(line), "{line}: {failing}");
        }
    }

    #[test]
    fn a_verdict_is_four_series_with_one_set() {
        let mut m = Exposition::default();
        m.verdict("v", "V.", &[("gate", "1".into())], "fail");
        let text = m.render();
        assert!(
            text.contains("v{gate=\"1\",verdict=\"fail\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("v{gate=\"1\",verdict=\"pass\"} 0\n"),
            "{text}"
        );
        assert_eq!(text.matches("v{").count(), 4);
    }
}
