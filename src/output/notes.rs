//! Notes said before the trial lines: each source the run could not use at all, and what the
//! repository read and left out, grouped by file.

use crate::streams::Streams;

/// Each source the run could not use at all, once and before any trial, with the whole
/// reason: the trials that need it then name it in a few words.
pub fn say_sources_down(state: &crate::state::State, env: &str, streams: &mut Streams) {
    for down in &state.sources_down {
        say_source_down(streams, env, &down.source, &down.reason);
    }
}

/// One source the run could not use, and that the trials reading it refer to this.
pub fn say_source_down(streams: &mut Streams, env: &str, source: &str, reason: &str) {
    for line in source_down_lines(env, source, reason) {
        streams.say(line);
    }
}

/// The lines [`say_source_down`] says.
pub fn source_down_lines(env: &str, source: &str, reason: &str) -> [String; 2] {
    [
        format!("error: {source} of {env} cannot be used: {reason}"),
        "  every trial that reads it is an error that refers to this".to_string(),
    ]
}

/// The repository's notes of a run (each construct read and left out, each value not read),
/// those of one file together under it as `gates validate` groups its problems, each then
/// naming only its line.
pub fn notes_by_file(notes: &[String]) -> String {
    let mut out = String::new();
    for (file, notes) in crate::repo::site::by_file(notes) {
        let Some(file) = file else {
            for note in notes {
                out.push_str(&format!("note: {note}\n"));
            }
            continue;
        };
        out.push_str(&format!("notes on {file}:\n"));
        for note in notes {
            out.push_str(&format!("  {}\n", within(file, note)));
        }
    }
    out
}

/// A note under its file's heading: `FILE:12: text` as `line 12: text`, `FILE: text` as `text`.
fn within(file: &str, note: &str) -> String {
    let Some(at) = note.find(file) else {
        return note.to_string();
    };
    let (before, after) = (&note[..at], &note[at + file.len()..]);
    match after.strip_prefix(':') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("{before}line {rest}")
        }
        Some(rest) => format!("{before}{}", rest.trim_start()),
        None => note.to_string(),
    }
}

#[cfg(test)]
mod notes_tests {
    use super::*;

    #[test]
    fn notes_are_grouped_under_their_file_and_each_names_only_its_line() {
        let notes: Vec<String> = [
            "the repository has no environment `x`; evaluating its `main` for it",
            "k/apps.yaml:54: the patch targets HelmRelease/*, which none of the resources is",
            "talos/c/eGPU.yaml: not read: the name says neither a role nor a declared node",
            "not read: k/secret.yaml:3: ExternalSecret s: Flux postBuild substitution",
            "k/apps.yaml:87: the patch targets Kustomization/*",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            notes_by_file(&notes),
            "note: the repository has no environment `x`; evaluating its `main` for it\n\
             notes on k/apps.yaml:\n  line 54: the patch targets HelmRelease/*, which none of the resources is\n  line 87: the patch targets Kustomization/*\n\
             notes on talos/c/eGPU.yaml:\n  not read: the name says neither a role nor a declared node\n\
             notes on k/secret.yaml:\n  not read: line 3: ExternalSecret s: Flux postBuild substitution\n"
        );
    }
}
