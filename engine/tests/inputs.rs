//! Each check kind declares the parts of the state it reads (`gates watch` re-evaluates a
//! trial only when one of them changes, and turns it into an error when one goes stale):
//! on every fixture snapshot, withholding a part a kind does not declare leaves each of its
//! trials' findings as they were. A kind that reads an undeclared part fails here.

use std::path::{Path, PathBuf};

use gates_engine::config::Config;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_check_kind_declares_every_part_of_the_state_it_reads() {
    let config = Config::load(&root().join("gates"), &[]).expect("the project's config");
    let mut judged = 0;
    let mut undeclared = Vec::new();
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
            for spec in gates_engine::runner::trials(&config, env) {
                judged += 1;
                let missing = gates_core::checks::testing::undeclared_inputs(
                    &spec.check,
                    env,
                    &snapshot.state,
                );
                if !missing.is_empty() {
                    undeclared.push(format!("{} on {}: {missing:?}", spec.name, path.display()));
                }
            }
        }
    }
    assert!(judged > 100, "{judged} trials judged");
    assert!(
        undeclared.is_empty(),
        "read but not declared:\n{}",
        undeclared.join("\n")
    );
}
