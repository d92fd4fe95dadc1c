//! The objects gates builds for one Kustomize directory, as JSON, for the differential
//! comparison of `tools/corpus/run` with `kubectl kustomize` (issue 26 item 10). Not a
//! subcommand: a measurement aid.
//!
//!     cargo run --release --example kustomize_render -- REPO_ROOT REL_DIR
//!     kubectl kustomize DIR | cargo run --release --example kustomize_render -- --yaml
//!
//! The first form prints the objects `gates::repo::kustomize::render` builds as one JSON
//! array, or the error on stderr with exit status 2 when gates cannot render the directory
//! (a remote base, a construct it refuses). The second reads a YAML stream on stdin (what
//! `kubectl kustomize` prints) and prints its documents as one JSON array, parsed by
//! `gates_core::yaml` as the fixture test parses them, so both sides reach the comparison through
//! the same typing of numbers, booleans and strings.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let objects = match args.as_slice() {
        [flag] if flag == "--yaml" => {
            let mut text = String::new();
            if let Err(err) = std::io::stdin().read_to_string(&mut text) {
                eprintln!("cannot read stdin: {err}");
                return ExitCode::from(2);
            }
            match gates_core::yaml::documents::<serde_json::Value>(&text) {
                Ok(objects) => objects,
                Err(err) => {
                    eprintln!("the YAML on stdin does not parse: {err}");
                    return ExitCode::from(2);
                }
            }
        }
        [repo, dir] => match gates::repo::kustomize::render(Path::new(repo), dir) {
            Ok(rendered) => rendered.objects.iter().map(|o| o.to_json()).collect(),
            Err(err) => {
                eprintln!("{err}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: kustomize_render REPO_ROOT REL_DIR | kustomize_render --yaml");
            return ExitCode::from(2);
        }
    };
    let text = match serde_json::to_string(&objects) {
        Ok(text) => text,
        Err(err) => {
            eprintln!("cannot write the objects as JSON: {err}");
            return ExitCode::from(2);
        }
    };
    match writeln!(std::io::stdout().lock(), "{text}") {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("cannot write the objects: {err}");
            ExitCode::from(2)
        }
    }
}
