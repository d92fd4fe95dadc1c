//! The page of one chaos run: verdict and outcome first, then the timeline, the host-loss
//! prediction beside what was measured, the probes against their budgets, the trials with
//! their evidence, who took over what, every event, and the power actions the harness sent.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::timeline::{self, trim};
use super::{badge, escape, evidence, page};
use gates_core::record::chaos::{ChaosRecord, Mode};
use gates_core::record::seconds::rounded;
use gates_core::record::split_brain::Signal;
use gates_core::record::timeline::Timeline;

pub fn render(report: &ChaosRecord, timeline: &Timeline) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<header><h1>{} Chaos on {}: host {}</h1>\
         <p class=\"sub\">{} · {} · gate 4: {}</p></header>",
        badge(report.verdict.as_str()),
        escape(&report.environment),
        escape(&report.host),
        escape(&report.started_at),
        escape(&report.decision),
        escape(&report.gate_title),
    );

    run_facts(&mut b, report);

    b.push_str("<section id=\"timeline\"><h2>Timeline</h2><figure>");
    b.push_str(&legend());
    b.push_str(&timeline::svg(report, timeline));
    b.push_str(
        "<figcaption class=\"sub\">Seconds since the start of the run. Outages run from the \
         first failed sample to the first good one; unknown means the probe could not tell \
         (for example, workloads while the API itself was down).</figcaption></figure></section>",
    );

    b.push_str(&super::prediction::section(report));

    probe_budgets(&mut b, report);

    trials(&mut b, report);

    b.push_str(&split_brain(report));

    handovers(&mut b, report);

    every_event(&mut b, timeline);

    power_actions(&mut b, report);
    b.push_str("<footer>Written by gates from the run's JSON report and timeline.</footer>");
    page(
        &format!(
            "gates chaos {} {}: {}",
            report.environment,
            report.host,
            report.verdict.as_str()
        ),
        &b,
    )
}

/// The run's facts: outcome, host, mode, the VMs acted on, timings.
fn run_facts(b: &mut String, report: &ChaosRecord) {
    b.push_str("<section><h2>Run</h2><dl class=\"facts\">");
    let vms: Vec<String> = report
        .vms
        .iter()
        .map(|v| format!("{} {} (node {})", v.vmid, v.name, v.node))
        .collect();
    let facts = [
        ("outcome", report.outcome.clone()),
        ("host", format!("{} ({})", report.host, report.host_choice)),
        ("mode", report.mode.as_str().to_string()),
        (
            match report.mode {
                Mode::Partition => "VMs cut off",
                Mode::EnvironmentVms | Mode::WholeHost => "VMs stopped",
            },
            list_or_none(&vms),
        ),
        ("left running", list_or_none(&report.untouched)),
        (
            "sample interval",
            format!("{}s", trim(report.sample_interval)),
        ),
        (
            "recovery",
            report
                .recovery_seconds()
                .map_or("not seen".to_string(), |s| {
                    format!("{}s after the restore began", trim(s))
                }),
        ),
        ("started", report.started_at.clone()),
        ("finished", report.finished_at.clone()),
    ];
    for (key, value) in facts {
        let _ = write!(b, "<dt>{key}</dt><dd>{}</dd>", escape(&value));
    }
    b.push_str("</dl></section>");
}

/// Each probe against its budgets.
fn probe_budgets(b: &mut String, report: &ChaosRecord) {
    b.push_str(
        "<section><h2>Probes against their budgets</h2><table><thead><tr><th>probe</th>\
         <th>verdict</th><th class=\"num\">longest</th><th class=\"num\">budget</th>\
         <th class=\"num\">total</th><th class=\"num\">budget</th><th class=\"num\">unknown</th>\
         <th class=\"num\">outages</th><th class=\"num\">samples</th></tr></thead><tbody>",
    );
    for p in &report.probes {
        let over = |value: f64, budget: f64| {
            if value > budget {
                format!("<td class=\"num over\">{}s</td>", trim(value))
            } else {
                format!("<td class=\"num\">{}s</td>", trim(value))
            }
        };
        let _ = write!(
            b,
            "<tr data-probe=\"{}\"><td>{}</td><td>{}</td>{}<td class=\"num\">{}s</td>{}\
             <td class=\"num\">{}s</td><td class=\"num\">{}s</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td></tr>",
            escape(&p.probe),
            escape(&p.probe),
            badge(p.finding.verdict.as_str()),
            over(rounded(p.longest), rounded(p.budget_longest)),
            trim(rounded(p.budget_longest)),
            over(rounded(p.total), rounded(p.budget_total)),
            trim(rounded(p.budget_total)),
            trim(p.unknown_seconds()),
            p.outages.len(),
            p.samples
        );
    }
    b.push_str("</tbody></table></section>");
}

/// The trials with their evidence.
fn trials(b: &mut String, report: &ChaosRecord) {
    b.push_str("<section><h2>Trials</h2><table><thead><tr><th>trial</th><th>verdict</th><th>what it found</th></tr></thead><tbody>");
    for t in &report.trials {
        let _ = write!(
            b,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}{}</td></tr>",
            escape(&t.name),
            badge(t.finding.verdict.as_str()),
            escape(&t.finding.summary),
            evidence(
                t.finding.verdict.as_str(),
                &t.finding.evidence,
                &t.finding.warnings
            )
        );
    }
    b.push_str("</tbody></table></section>");
}

/// Who took over the API VIP, an L2 lease or etcd's leadership.
fn handovers(b: &mut String, report: &ChaosRecord) {
    b.push_str("<section><h2>Handovers</h2>");
    if report.handovers.is_empty() {
        b.push_str("<p>No API VIP, L2 lease or etcd leader changed hands.</p>");
    } else {
        b.push_str("<table><thead><tr><th class=\"num\">at</th><th>what</th><th>of</th><th>change</th></tr></thead><tbody>");
        for e in &report.handovers {
            let _ = write!(
                b,
                "<tr><td class=\"num\">{}s</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                trim(rounded(e.at)),
                escape(&e.kind),
                escape(&e.subject),
                escape(&e.detail)
            );
        }
        b.push_str("</tbody></table>");
    }
    b.push_str("</section>");
}

/// Every event on the timeline, folded.
fn every_event(b: &mut String, timeline: &Timeline) {
    if !timeline.events.is_empty() {
        b.push_str("<section><h2>Events</h2><details><summary>every event on the timeline</summary><table><thead><tr><th class=\"num\">at</th><th>event</th><th>subject</th><th>detail</th></tr></thead><tbody>");
        for e in &timeline.events {
            let _ = write!(
                b,
                "<tr><td class=\"num\">{:.1}s</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                rounded(e.at),
                escape(&e.kind),
                escape(&e.subject),
                escape(&e.detail)
            );
        }
        b.push_str("</tbody></table></details></section>");
    }
}

/// The power (and link) actions the harness sent.
fn power_actions(b: &mut String, report: &ChaosRecord) {
    if !report.power_actions.is_empty() {
        b.push_str("<section><h2>Power actions</h2><table><thead><tr><th>action</th><th>VM</th><th>host</th><th>result</th></tr></thead><tbody>");
        for a in &report.power_actions {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(a.action.as_str()),
                a.vmid.map(|v| v.to_string()).unwrap_or_default(),
                escape(&a.host),
                escape(&a.result)
            );
        }
        b.push_str("</tbody></table></section>");
    }
}

/// A partition run's split-brain signals: what each means and what it found.
fn split_brain(report: &ChaosRecord) -> String {
    let Some(signals) = &report.split_brain else {
        return String::new();
    };
    let mut b = String::from(
        "<section id=\"split-brain\"><h2>Split brain</h2><p class=\"sub\">Sampled during the \
         partition and after the links came back. A signal seen fails the run; one that could \
         not be read is an error.</p><table><thead><tr><th>signal</th><th>what it would mean</th>\
         <th>verdict</th><th class=\"num\">samples</th><th>what it found</th></tr></thead><tbody>",
    );
    for s in signals {
        let meaning = match s.signal {
            Signal::ApiVip => "two control planes list the API VIP at once",
            Signal::L2Announcement => "two nodes announce one L2 address",
            Signal::EtcdMinority => "the cut-off etcd member led or took writes on its own",
        };
        let _ = write!(
            b,
            "<tr data-signal=\"{}\"><td>{}</td><td>{meaning}</td><td>{}</td><td class=\"num\">{}</td><td>{}{}</td></tr>",
            escape(s.signal.as_str()),
            escape(s.signal.as_str()),
            badge(s.finding.verdict.as_str()),
            s.samples,
            escape(&s.finding.summary),
            evidence(s.finding.verdict.as_str(), &s.finding.evidence, &[])
        );
    }
    b.push_str("</tbody></table></section>");
    b
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn legend() -> String {
    // The hatch pattern is the timeline's own (`#unknown-hatch`): one definition per page.
    let swatch =
        |body: &str| format!("<svg width=\"22\" height=\"12\" aria-hidden=\"true\">{body}</svg>");
    format!(
        "<div class=\"legend\"><span>{}sampled, up</span><span>{}down (outage)</span>\
         <span>{}unknown</span><span>{}fault</span><span>{}restore</span><span>{}recovered</span></div>",
        swatch("<rect width=\"22\" height=\"12\" fill=\"#e3f3ec\" stroke=\"#009E73\"/>"),
        swatch("<rect width=\"22\" height=\"12\" fill=\"#D55E00\"/>"),
        swatch(
            "<rect width=\"22\" height=\"12\" fill=\"url(#unknown-hatch)\" stroke=\"#767676\"/>"
        ),
        swatch("<line x1=\"11\" y1=\"0\" x2=\"11\" y2=\"12\" stroke=\"#000\" stroke-width=\"2\"/>"),
        swatch(
            "<line x1=\"11\" y1=\"0\" x2=\"11\" y2=\"12\" stroke=\"#0072B2\" stroke-width=\"2\" stroke-dasharray=\"4 2\"/>"
        ),
        swatch(
            "<line x1=\"11\" y1=\"0\" x2=\"11\" y2=\"12\" stroke=\"#009E73\" stroke-width=\"2\" stroke-dasharray=\"2 2\"/>"
        ),
    )
}

/// Write `<stem>.html` from the `.json` and `.timeline.json` beside it: the page of a run
/// redrawn from its files (copied off a CI artifact, say).
pub fn write_beside(stem: &Path) -> Result<PathBuf, String> {
    let (report, timeline) = crate::output::report::read_back::chaos(stem)?;
    write(&report, &timeline, stem)
}

/// Write `<stem>.html` from a run's record and timeline.
pub fn write(report: &ChaosRecord, timeline: &Timeline, stem: &Path) -> Result<PathBuf, String> {
    let path = stem.with_extension("html");
    std::fs::write(&path, render(report, timeline))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chaos report with one probe whose longest outage is `longest` against a 2 s budget.
    fn report_with_api_outage(longest: f64) -> ChaosRecord {
        serde_json::from_value(serde_json::json!({
            "environment": "lab", "host": "pve2", "mode": "environment-vms",
            "started_at": "2026-12-01T02:30:00.000Z", "finished_at": "2026-12-01T02:31:00.000Z",
            "outcome": "completed", "trials": [],
            "verdict": if longest > 2.0 { "fail" } else { "pass" },
            "moments": {"fault": 1.0, "restore": 20.0},
            "probes": [{
                "probe": "api", "samples": 40, "outages": [{"start": 2.0, "end": 2.0 + longest}],
                "longest": longest, "total": longest, "budget_longest": 2.0, "budget_total": 3.0,
                "finding": {"verdict": if longest > 2.0 { "fail" } else { "pass" }, "summary": "api"}
            }]
        }))
        .unwrap()
    }

    #[test]
    fn an_outage_over_its_budget_is_marked_in_words_and_style() {
        let page = render(&report_with_api_outage(4.5), &Timeline::default());
        assert!(page.contains("<td class=\"num over\">4.5s</td>"), "{page}");
        assert!(page.contains("<span class=\"badge fail\">FAIL</span>"));
        let within = render(&report_with_api_outage(1.5), &Timeline::default());
        assert!(!within.contains("class=\"num over\""));
    }

    #[test]
    fn a_partition_runs_split_brain_signals_are_shown_with_their_evidence() {
        let mut report = report_with_api_outage(1.5);
        report.mode = Mode::Partition;
        report.split_brain = serde_json::from_value(serde_json::json!([
            {"signal": "api-vip", "samples": 12, "finding": {"verdict": "fail",
             "summary": "two control planes held the API VIP at once in 1 sample(s)",
             "evidence": ["at 31.0s: cp-1 and cp-2"]}},
            {"signal": "etcd-minority", "samples": 12, "finding": {"verdict": "error",
             "summary": "the etcd status of cp-1 was never read"}}
        ]))
        .unwrap();
        let page = render(&report, &Timeline::default());
        assert!(page.contains("<h2>Split brain</h2>"), "{page}");
        assert!(page.contains("VMs cut off</dt>"), "{page}");
        assert!(
            page.contains("data-signal=\"api-vip\"") && page.contains("at 31.0s: cp-1 and cp-2"),
            "{page}"
        );
        assert!(
            page.contains("<span class=\"badge error\">ERROR</span>"),
            "{page}"
        );
        let power = render(&report_with_api_outage(1.5), &Timeline::default());
        assert!(!power.contains("Split brain"), "a power loss has none");
    }

    #[test]
    fn without_a_timeline_file_the_lanes_still_show_the_reports_intervals() {
        let page = render(&report_with_api_outage(4.5), &Timeline::default());
        assert!(
            page.contains("data-start=\"2.000\" data-end=\"6.500\""),
            "{page}"
        );
        assert!(
            !page.contains("class=\"sampled\""),
            "no samples, no sampled span"
        );
        assert!(page.contains("recovery</dt><dd>not seen</dd>"));
    }
}
