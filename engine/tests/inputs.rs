//! What each trial reads, over every fixture snapshot and both configured environments:
//!
//! - each check kind declares the parts of the state it reads (`gates watch` re-evaluates a
//!   trial only when one of them changes, and turns it into an error when one goes stale):
//!   withholding a part a kind does not declare leaves each of its trials' findings as they
//!   were, so a kind that reads an undeclared part fails here;
//! - the indexes the trials of one evaluation share (`gates_core::checks::Indexes`) only make
//!   lookups quicker: each trial's finding with them equals its finding when every list is
//!   read whole.

use std::path::{Path, PathBuf};

use gates_core::checks::indexes::Kept;
use gates_core::checks::{Context, Indexes};
use gates_core::config::Environment;
use gates_core::state::{Pod, State};
use gates_engine::config::Config;
use gates_engine::runner::TrialSpec;
use std::sync::Arc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Calls `each` with every fixture snapshot that reads, in both environments, once per
/// environment with all its trials; returns how many trials there were.
fn each_fixture(mut each: impl FnMut(&Path, &Environment, &[TrialSpec], &State)) -> usize {
    let config = Config::load(&root().join("gates"), &[]).expect("the project's config");
    let mut trials = 0;
    for entry in std::fs::read_dir(root().join("fixtures/snapshots")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Ok(snapshot) =
            gates_engine::collect::snapshot::read(std::slice::from_ref(&path), chrono::Utc::now())
        else {
            continue;
        };
        for env in ["staging", "production"] {
            let env = config.environment(env).unwrap();
            let specs = gates_engine::runner::trials(&config, env);
            trials += specs.len();
            each(&path, env, &specs, &snapshot.state);
        }
    }
    trials
}

#[test]
fn every_check_kind_declares_every_part_of_the_state_it_reads() {
    let mut undeclared = Vec::new();
    let judged = each_fixture(|path, env, specs, state| {
        for spec in specs {
            let missing = gates_core::checks::testing::undeclared_inputs(&spec.check, env, state);
            if !missing.is_empty() {
                undeclared.push(format!("{} on {}: {missing:?}", spec.name, path.display()));
            }
        }
    });
    assert!(judged > 100, "{judged} trials judged");
    assert!(
        undeclared.is_empty(),
        "read but not declared:\n{}",
        undeclared.join("\n")
    );
}

/// The state's pods as a list before might have held them, one edit of each kind apart: a
/// pod gone since at the front (like the first, renamed), the fifth not there yet, and every
/// fourth from the third another object (equal; the walk must still edit it in).
fn before(state: &State) -> Vec<Arc<Pod>> {
    let pods = state.pods.present().map_or(&[][..], Vec::as_slice);
    let gone = pods.first().map(|first| {
        let mut gone = (**first).clone();
        gone.metadata.name = Some(format!("{}-gone", gates_core::meta::name(&first.metadata)));
        Arc::new(gone)
    });
    let kept = pods.iter().enumerate().filter_map(|(i, pod)| match i % 4 {
        _ if i == 4 => None,
        2 => Some(Arc::new((**pod).clone())),
        _ => Some(pod.clone()),
    });
    gone.into_iter().chain(kept).collect()
}

#[test]
fn every_trial_finds_the_same_with_the_shared_indexes_as_reading_each_list_whole() {
    let mut differ = Vec::new();
    let judged = each_fixture(|path, env, specs, state| {
        // One set of indexes for all the trials, as an evaluation shares them.
        let asked = || specs.iter().filter_map(|s| s.check.pods_asked());
        let indexed = Indexes::new(state).expecting(asked());
        // And as `gates watch` keeps them: brought up from a list before, edited for what
        // differs.
        let mut kept = Kept::new(asked());
        kept.refresh(&before(state));
        let kept = Indexes::new(state).expecting(asked()).kept(&mut kept);
        for spec in specs {
            let with = |indexes: &Indexes<'_>| {
                serde_json::to_value(spec.check.evaluate(Context {
                    env,
                    state,
                    indexes,
                    pause: &gates_core::pause::NEVER,
                }))
                .unwrap()
            };
            let whole = with(&Indexes::unindexed(state));
            for (how, fast) in [("indexed", with(&indexed)), ("kept", with(&kept))] {
                if fast != whole {
                    differ.push(format!(
                        "{} on {}:\n  {how}: {fast}\n  whole:   {whole}",
                        spec.name,
                        path.display()
                    ));
                }
            }
        }
    });
    assert!(judged > 100, "{judged} trials judged");
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
