//! Trials: one per check of each gate that applies to the environment. The state is
//! collected once and every selected trial is evaluated against it; the terminal's reporter
//! (`output::libtest`) prints the results.

use std::time::Instant;

use crate::checks::{CheckSpec, Context};
use crate::config::{Config, Environment, Gate};
use crate::selection::Asked;
use crate::state::State;
use crate::verdict::Verdict;
pub use gates_core::record::check::GateStatus;
pub use gates_core::record::trial::{Tally, TrialResult};

/// One check of one gate in one environment, before it runs.
#[derive(Debug, Clone)]
pub struct TrialSpec {
    /// `gate2::staging::replicated-controller::coredns`
    pub name: String,
    pub gate: u32,
    pub check: CheckSpec,
}

/// The trials of an environment in gate order.
pub fn trials(config: &Config, env: &Environment) -> Vec<TrialSpec> {
    config
        .gates_for(env)
        .flat_map(|gate| gate.checks.iter().map(move |check| (gate, check)))
        .map(|(gate, check)| TrialSpec {
            name: trial_name(gate, &env.name, check),
            gate: gate.number,
            check: check.clone(),
        })
        .collect()
}

fn trial_name(gate: &Gate, env: &str, check: &CheckSpec) -> String {
    match check.instance() {
        Some(instance) => format!("gate{}::{env}::{}::{instance}", gate.number, check.kind()),
        None => format!("gate{}::{env}::{}", gate.number, check.kind()),
    }
}

/// The trials the command line selects (filter, `--exact`, `--skip`).
pub fn selected<'a>(asked: &Asked<'_>, specs: &'a [TrialSpec]) -> Vec<&'a TrialSpec> {
    specs
        .iter()
        .filter(|spec| asked.selects(&spec.name))
        .collect()
}

/// Evaluate the selected trials against one state. Pure apart from measuring time.
///
/// Checks only read the state, so they run side by side on every core the process may use
/// (on a large cluster the host-loss prediction alone takes as long as all the others
/// together); the results keep the order of `specs`.
pub fn evaluate(specs: &[&TrialSpec], env: &Environment, state: &State) -> Vec<TrialResult> {
    evaluate_pausing(specs, env, state, &gates_core::pause::NEVER)
}

/// [`evaluate`], the long evaluations held at their pause points while `pause` says so
/// (`gates watch` holds its host-loss prediction while it evaluates a change).
pub fn evaluate_pausing(
    specs: &[&TrialSpec],
    env: &Environment,
    state: &State,
    pause: &dyn gates_core::pause::Pause,
) -> Vec<TrialResult> {
    // One set of indexes for the whole evaluation: the trials side by side share them.
    let indexes = crate::checks::Indexes::new(state)
        .expecting(specs.iter().filter_map(|s| s.check.pods_asked()));
    evaluate_indexed(specs, env, state, &indexes, pause)
}

/// [`evaluate_pausing`] over the indexes `indexes` (of `state`): `gates watch` keeps part of
/// them from one evaluation to the next.
pub fn evaluate_indexed(
    specs: &[&TrialSpec],
    env: &Environment,
    state: &State,
    indexes: &crate::checks::Indexes<'_>,
    pause: &dyn gates_core::pause::Pause,
) -> Vec<TrialResult> {
    let ctx = Context {
        env,
        state,
        indexes,
        pause,
    };
    let one = |spec: &TrialSpec| {
        let started = Instant::now();
        let finding = spec.check.evaluate(ctx);
        result_of(spec, finding, started.elapsed())
    };
    gates_core::side_by_side::map(specs, |spec| one(spec))
}

/// The result of trial `spec`: its finding and how long it took.
pub fn result_of(
    spec: &TrialSpec,
    finding: crate::verdict::Finding,
    duration: std::time::Duration,
) -> TrialResult {
    TrialResult {
        name: spec.name.clone(),
        gate: spec.gate,
        kind: spec.check.kind().into(),
        instance: spec.check.instance().map(str::to_string),
        finding,
        duration,
    }
}

pub fn gate_statuses(
    config: &Config,
    env: &Environment,
    results: &[TrialResult],
) -> Vec<GateStatus> {
    config
        .gates_for(env)
        .filter_map(|gate| {
            let mine: Vec<&TrialResult> =
                results.iter().filter(|r| r.gate == gate.number).collect();
            if mine.is_empty() {
                return None;
            }
            // Skipped trials (not applicable here, e.g. Talos on an offline run) neither
            // prove nor break a gate; a gate with nothing but skips is itself skipped.
            let verdict = mine
                .iter()
                .map(|r| r.finding.verdict)
                .max_by_key(|v| severity(*v))
                .unwrap_or(Verdict::Skip);
            Some(GateStatus {
                gate: gate.number,
                title: gate.title.clone(),
                verdict,
                trials: mine.len(),
            })
        })
        .collect()
}

/// A gate is as good as its worst trial; skips rank below passes.
fn severity(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Skip => 0,
        Verdict::Pass => 1,
        Verdict::Fail => 2,
        Verdict::Error => 3,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn results_keep_the_order_of_the_trials_whichever_thread_evaluated_them() {
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        let config = Config::load(&root.join("gates"), &[]).expect("the project's config");
        let env = config.environment("staging").expect("staging");
        let snapshot = crate::collect::snapshot::read(
            &[root.join("fixtures/snapshots/target-staging.json")],
            chrono::Utc::now(),
        )
        .expect("a fixture");
        let specs = trials(&config, env);
        assert!(specs.len() > 4, "{} trials", specs.len());
        let selected: Vec<&TrialSpec> = specs.iter().collect();
        let results = evaluate(&selected, env, &snapshot.state);
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        let wanted: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, wanted);
        // Each result is its own trial's finding, as evaluating that trial alone gives.
        for (spec, result) in specs.iter().zip(&results) {
            let alone = evaluate(&[spec], env, &snapshot.state);
            assert_eq!(
                alone[0].finding.verdict, result.finding.verdict,
                "{}",
                spec.name
            );
            assert_eq!(
                alone[0].finding.summary, result.finding.summary,
                "{}",
                spec.name
            );
        }
    }
}
