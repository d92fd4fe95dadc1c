//! The JSON report: the run as one document, stable keys, for machines.

use super::Run;

pub fn render(run: &Run) -> String {
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string_pretty(run).unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::checks::testing::{env, state};
    use crate::output::report::Run;
    use crate::runner::{GateStatus, Tally, TrialResult};
    use crate::state::provenance::Provenance;
    use crate::verdict::{Finding, Verdict};
    use gates_core::record::check::Promotion;

    #[test]
    fn a_report_read_back_as_the_record_that_wrote_it_writes_the_same_bytes() {
        let state = state().build();
        let trials = vec![
            TrialResult {
                name: "gate1::staging::distinct-hosts".into(),
                gate: 1,
                kind: "distinct-hosts".into(),
                instance: None,
                finding: Finding::pass("3 control-plane nodes on 3 hosts"),
                duration: Duration::from_nanos(123_457),
            },
            TrialResult {
                name: "gate4::staging::chaos-report".into(),
                gate: 4,
                kind: "chaos-report".into(),
                instance: Some("pve1".into()),
                finding: Finding::skip("no chaos report for staging"),
                duration: Duration::from_micros(5),
            },
        ];
        let run = Run {
            schema_version: gates_core::schema::SCHEMA_VERSION,
            provenance: Some(Provenance::of(&env(), &state, state.collected_at)),
            environment: "staging".into(),
            decision: "adr-007".into(),
            started_at: state.collected_at,
            source: state.source.clone(),
            collect_time: Duration::from_nanos(354_892_138),
            tally: Tally::of(&trials),
            gates: vec![GateStatus {
                gate: 1,
                title: "Three control planes on three hosts.".into(),
                verdict: Verdict::Pass,
                trials: 1,
            }],
            trials,
            promotion: Some(Promotion {
                ready: false,
                blockers: vec!["gate 4 was skipped: no chaos report for staging".into()],
            }),
        };
        let written = super::render(&run);
        let read: Run = serde_json::from_str(&written).unwrap();
        assert_eq!(super::render(&read), written);
        assert!(written.starts_with("{\n  \"schema_version\": 1,\n  \"environment\""));
    }
}
