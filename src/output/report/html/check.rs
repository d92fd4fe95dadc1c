//! The page of one `gates check` run: how the rollout stands (each gate and its verdict),
//! then every trial of every gate with its summary and evidence.

use std::fmt::Write as _;

use super::{badge, escape, evidence, page};
use crate::output::report::Run;
use crate::state::Source;
use crate::verdict::Verdict;

pub fn render(run: &Run) -> String {
    let t = &run.tally;
    let passing = run
        .gates
        .iter()
        .filter(|g| g.verdict == Verdict::Pass)
        .count();
    let overall = if t.errors > 0 {
        Verdict::Error
    } else if t.failed > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    let source = match &run.source {
        Source::Live { context } => format!("live, kube context {context}"),
        Source::Snapshot { files } => format!("snapshot {}", files.join(", ")),
    };
    let mut b = String::new();
    let _ = write!(
        b,
        "<header><h1>{} Rollout: {passing} of {} gates pass for {}</h1>\
         <p class=\"sub\">{} · {} · {} · {} passed, {} failed, {} errors, {} skipped</p></header>",
        badge(overall.as_str()),
        run.gates.len(),
        escape(&run.environment),
        escape(&run.decision),
        escape(&run.started_at.to_rfc3339()),
        escape(&source),
        t.passed,
        t.failed,
        t.errors,
        t.skipped
    );
    b.push_str(
        "<section class=\"provenance\"><h2>Provenance</h2><table class=\"provenance\"><tbody>",
    );
    for (name, value) in run.provenance.iter().flat_map(|p| p.properties()) {
        let _ = write!(
            b,
            "<tr data-property=\"{name}\"><th>{}</th><td><code>{}</code></td></tr>",
            escape(name.trim_start_matches("provenance.")),
            escape(&value)
        );
    }
    b.push_str("</tbody></table></section>");
    b.push_str(
        "<section><h2>Gates</h2><table class=\"gates\"><thead><tr><th class=\"num\">gate</th>\
         <th>verdict</th><th>title</th><th class=\"num\">trials</th></tr></thead><tbody>",
    );
    for gate in &run.gates {
        let _ = write!(
            b,
            "<tr data-gate=\"{}\"><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            gate.gate,
            gate.gate,
            badge(gate.verdict.as_str()),
            escape(&gate.title),
            gate.trials
        );
    }
    b.push_str("</tbody></table></section>");

    for gate in &run.gates {
        let _ = write!(
            b,
            "<section><h2>Gate {}: {}</h2><table class=\"trials\"><thead><tr><th>trial</th>\
             <th>verdict</th><th>what it found</th></tr></thead><tbody>",
            gate.gate,
            escape(&gate.title)
        );
        for trial in run.trials.iter().filter(|t| t.gate == gate.gate) {
            let verdict = trial.finding.verdict.as_str();
            let _ = write!(
                b,
                "<tr data-trial=\"{}\" data-verdict=\"{verdict}\"><td><code>{}</code></td><td>{}</td><td>{}{}</td></tr>",
                escape(&trial.name),
                escape(&trial.name),
                badge(verdict),
                escape(&trial.finding.summary),
                evidence(verdict, &trial.finding.evidence, &trial.finding.warnings)
            );
        }
        b.push_str("</tbody></table></section>");
    }
    let _ = write!(
        b,
        "<footer>Written by gates; collected in {:.1}s.</footer>",
        run.collect_time.as_secs_f64()
    );
    page(
        &format!(
            "gates check {}: {passing} of {} gates pass",
            run.environment,
            run.gates.len()
        ),
        &b,
    )
}
