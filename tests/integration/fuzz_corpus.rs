//! Every input the fuzzers were given or found (fuzz/corpus/TARGET, and crashes saved under
//! fuzz/artifacts/TARGET) is replayed through the same entry points on every `cargo test`:
//! each must finish without a panic within a few seconds.

use std::path::Path;
use std::time::Duration;

use crate::support::root;

const LIMIT: Duration = Duration::from_secs(30);

fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_fuzz_input_is_handled_without_a_panic_or_a_hang() {
    for (name, target) in gates::fuzzing::TARGETS {
        let corpus = inputs(&root().join("fuzz/corpus").join(name));
        assert!(!corpus.is_empty(), "fuzz/corpus/{name} holds no input");
        let found = inputs(&root().join("fuzz/artifacts").join(name));
        for file in corpus.into_iter().chain(found) {
            let data = std::fs::read(&file).unwrap();
            let target = *target;
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let outcome = std::panic::catch_unwind(|| target(&data));
                let _ = tx.send(outcome.is_ok());
            });
            match rx.recv_timeout(LIMIT) {
                Ok(true) => {}
                Ok(false) => panic!("{} panicked ({name})", file.display()),
                Err(_) => panic!(
                    "{} did not finish within {LIMIT:?} ({name})",
                    file.display()
                ),
            }
        }
    }
}
