//! The indexes the trials of one evaluation share (`gates_core::checks::Indexes`) only make
//! lookups quicker: on every fixture snapshot, each trial's finding with them equals its
//! finding when every list is read whole.

use std::path::{Path, PathBuf};

use gates_core::checks::{Context, Indexes};
use gates_engine::config::Config;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_trial_finds_the_same_with_the_shared_indexes_as_reading_each_list_whole() {
    let config = Config::load(&root().join("gates"), &[]).expect("the project's config");
    let mut judged = 0;
    let mut differ = Vec::new();
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
        let state = &snapshot.state;
        for env in ["staging", "production"] {
            let env = config.environment(env).unwrap();
            // One set of indexes for all the trials, as an evaluation shares them.
            let indexed = Indexes::new(state);
            for spec in gates_engine::runner::trials(&config, env) {
                let with = |indexes: &Indexes<'_>| {
                    serde_json::to_value(spec.check.evaluate(Context {
                        env,
                        state,
                        indexes,
                    }))
                    .unwrap()
                };
                judged += 1;
                let (fast, whole) = (with(&indexed), with(&Indexes::unindexed(state)));
                if fast != whole {
                    differ.push(format!(
                        "{} on {}:\n  indexed: {fast}\n  whole:   {whole}",
                        spec.name,
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(judged > 100, "{judged} trials judged");
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
