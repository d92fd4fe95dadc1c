//! The chaos page's "predicted beside measured" section. The host-loss model says what losing
//! the host should cost (a VIP failover, an ingress blink while the L2 lease moves, which pods
//! go where); the run measures what it did cost. Side by side, a reader sees at once whether
//! the model can be trusted for the hosts no chaos run touches (production, gate 5), and
//! where it was wrong. Each row says in words whether the two agree, so the colours are only
//! a second cue.

use std::fmt::Write as _;

use super::escape;
use gates_core::hostloss::Outcome;
use gates_core::record::chaos::ChaosRecord;

/// The section, or a plain sentence when the report holds no prediction.
pub fn section(report: &ChaosRecord) -> String {
    let mut b = String::from("<section id=\"prediction\"><h2>Predicted beside measured</h2>");
    let Some(p) = &report.prediction else {
        b.push_str(
            "<p>This report holds no prediction: the host-loss model could not predict this \
             host (or the report was written before runs were compared with it).</p></section>",
        );
        return b;
    };
    let _ = write!(
        b,
        "<p>The host-loss model predicted losing <strong>{}</strong> as <strong \
         class=\"outcome {}\">{}</strong>{}</p>",
        escape(&p.host),
        outcome_class(p.outcome),
        escape(p.outcome.as_str()),
        if p.reasons.is_empty() { "." } else { ":" }
    );
    if !p.reasons.is_empty() {
        b.push_str("<ul class=\"reasons\">");
        for reason in &p.reasons {
            let _ = write!(b, "<li>{}</li>", escape(&reason.text));
        }
        b.push_str("</ul>");
    }
    let (agree, differ) = tally(
        p.probes
            .iter()
            .map(|r| r.agrees)
            .chain(p.pods.iter().map(|r| r.agrees)),
    );
    let _ = write!(
        b,
        "<p class=\"sub\">{agree} agree, {differ} differ, {} without a claim either way.</p>",
        p.probes.len() + p.pods.len() - agree - differ
    );

    b.push_str(
        "<table class=\"prediction probes\"><caption>Probes: the outage expected and the \
         outage measured</caption><thead><tr><th>probe</th><th>predicted</th><th>measured</th>\
         <th>agreement</th></tr></thead><tbody>",
    );
    for row in &p.probes {
        let _ = write!(
            b,
            "<tr data-prediction-probe=\"{}\" data-agrees=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&row.probe),
            agrees_attr(row.agrees),
            escape(&row.probe),
            escape(&row.predicted),
            escape(&row.measured),
            agreement(row.agrees)
        );
    }
    b.push_str("</tbody></table>");

    if p.pods.is_empty() {
        b.push_str("<p>The model expected no pod to move.</p>");
    } else {
        b.push_str(
            "<table class=\"prediction pods\"><caption>Pods on the lost nodes: where the model \
             placed each replacement and where it came up</caption><thead><tr><th>pod</th>\
             <th>predicted</th><th>measured</th><th>agreement</th></tr></thead><tbody>",
        );
        for row in &p.pods {
            let _ = write!(
                b,
                "<tr data-prediction-pod=\"{}\" data-agrees=\"{}\"><td><code>{}</code><br>\
                 <span class=\"sub\">{}</span></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&row.pod),
                agrees_attr(row.agrees),
                escape(&row.pod),
                escape(&row.controller),
                escape(&row.predicted),
                escape(&row.measured),
                agreement(row.agrees)
            );
        }
        b.push_str("</tbody></table>");
    }
    b.push_str("</section>");
    b
}

/// How many rows agree and how many differ.
fn tally(rows: impl Iterator<Item = Option<bool>>) -> (usize, usize) {
    rows.fold((0, 0), |(yes, no), agrees| match agrees {
        Some(true) => (yes + 1, no),
        Some(false) => (yes, no + 1),
        None => (yes, no),
    })
}

fn agrees_attr(agrees: Option<bool>) -> &'static str {
    match agrees {
        Some(true) => "yes",
        Some(false) => "no",
        None => "none",
    }
}

/// A word with a mark, styled like a verdict badge: readable without colour.
fn agreement(agrees: Option<bool>) -> &'static str {
    match agrees {
        Some(true) => "<span class=\"agree yes\">\u{2713} agrees</span>",
        Some(false) => "<span class=\"agree no\">\u{2717} differs</span>",
        None => "<span class=\"agree none\">no claim</span>",
    }
}

fn outcome_class(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Survives => "survives",
        Outcome::Degraded => "degraded",
        Outcome::Lost => "lost",
        Outcome::Unknown => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(prediction: serde_json::Value) -> ChaosRecord {
        serde_json::from_value(serde_json::json!({
            "environment": "staging", "host": "pve1", "mode": "environment-vms",
            "started_at": "2026-12-01T02:30:00.000Z", "finished_at": "2026-12-01T02:31:00.000Z",
            "outcome": "completed", "trials": [], "verdict": "pass", "prediction": prediction
        }))
        .unwrap()
    }

    #[test]
    fn each_probe_and_moved_pod_shows_predicted_beside_measured_with_agreement_in_words() {
        let html = section(&report(serde_json::json!({
            "host": "pve1", "outcome": "degraded",
            "reasons": [{"severity": "degraded", "text": "the API VIP moves"}],
            "probes": [
                {"probe": "api-vip-new-connection", "predicted": "a VIP failover outage (about a minute)",
                 "measured": "down 41.5s longest, 41.5s in total", "agrees": true},
                {"probe": "etcd-quorum", "predicted": "no outage: 2 of 3 members left",
                 "measured": "down 2.0s longest, 2.0s in total", "agrees": false},
                {"probe": "ingress::x", "predicted": "no prediction", "measured": "no outage", "agrees": null}
            ],
            "pods": [{"pod": "kube-system/coredns-abc12-xyz12", "controller": "Deployment kube-system/coredns",
                      "predicted": "talos-stg-cp-02 after 300s",
                      "measured": "talos-stg-cp-02 after 4m12s (kube-system/coredns-abc12-qqqqq)", "agrees": true}]
        })));
        assert!(html.contains("<tr data-prediction-probe=\"api-vip-new-connection\" data-agrees=\"yes\"><td>api-vip-new-connection</td><td>a VIP failover outage (about a minute)</td><td>down 41.5s longest, 41.5s in total</td>"), "{html}");
        assert!(html.contains("data-prediction-probe=\"etcd-quorum\" data-agrees=\"no\""));
        assert!(html.contains("\u{2717} differs"));
        assert!(html.contains("data-agrees=\"none\""));
        assert!(html.contains("<td>talos-stg-cp-02 after 300s</td><td>talos-stg-cp-02 after 4m12s (kube-system/coredns-abc12-qqqqq)</td>"), "{html}");
        assert!(html.contains("as <strong class=\"outcome degraded\">degraded</strong>:</p><ul class=\"reasons\"><li>the API VIP moves</li></ul>"), "{html}");
        assert!(
            html.contains("2 agree, 1 differ, 1 without a claim either way."),
            "{html}"
        );
    }

    #[test]
    fn a_report_without_a_prediction_says_so_rather_than_showing_empty_tables() {
        let html = section(&report(serde_json::Value::Null));
        assert!(html.contains("holds no prediction"));
        assert!(!html.contains("<table"));
    }
}
