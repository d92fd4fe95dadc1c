//! `gates chart-values FILE...`: judge values files for gates's Helm chart against the chart's
//! schema before Helm does, naming the file, line and key of every problem. Helm refuses the
//! same values at install, upgrade, template and lint, but reads them into a map first and
//! names only a value's path (`- at '/watch/port': got string, want integer`).

use std::path::PathBuf;

use gates_core::exit::ExitCode;

use crate::streams::Streams;

/// The chart's schema and its own values, as shipped in `deploy/helm/gates/`.
pub const SCHEMA: &str = include_str!("../../deploy/helm/gates/values.schema.json");
pub const DEFAULTS: &str = include_str!("../../deploy/helm/gates/values.yaml");

/// Every problem of every file, each on a line (`values.yaml:4: watch.port: got string, want
/// integer`), or a line per file that fits; the exit code says whether any did not.
pub fn run(files: &[PathBuf], streams: &mut Streams) -> ExitCode {
    let chart = serde_json::from_str(SCHEMA)
        .map_err(|e| e.to_string())
        .and_then(|schema| {
            let defaults = gates_core::chart_values::values("values.yaml", DEFAULTS)
                .map_err(|e| e.to_string())?;
            Ok((schema, defaults))
        });
    let (schema, defaults) = match chart {
        Ok(chart) => chart,
        Err(err) => {
            streams.println(format!("the chart built into gates is not read: {err}"));
            return ExitCode::CannotTell;
        }
    };
    let mut fits = true;
    for file in files {
        let name = file.display().to_string();
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(err) => {
                fits = false;
                streams.println(format!("{name}: cannot be read: {err}"));
                continue;
            }
        };
        match gates_core::chart_values::check(&name, &text, &schema, &defaults) {
            Ok(problems) if problems.is_empty() => {
                streams.println(format!("{name}: fits the chart's schema"));
            }
            Ok(problems) => {
                fits = false;
                for problem in problems {
                    streams.println(problem);
                }
            }
            Err(err) => {
                fits = false;
                streams.println(err);
            }
        }
    }
    if fits {
        ExitCode::Passed
    } else {
        ExitCode::CannotTell
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files written into a directory, and what `run` printed over them and its code.
    fn judged(files: &[(&str, &str)]) -> (String, ExitCode) {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = files
            .iter()
            .map(|(name, text)| {
                let path = dir.path().join(name);
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect();
        let (mut streams, captured) = Streams::captured();
        let code = run(&paths, &mut streams);
        let out = captured.out();
        (out.replace(&format!("{}/", dir.path().display()), ""), code)
    }

    #[test]
    fn the_shipped_values_fit_the_shipped_schema_and_a_bad_file_is_named_line_by_line() {
        let (out, code) = judged(&[
            ("values.yaml", DEFAULTS),
            (
                "mine.yaml",
                "watch:\n  port: ninety\nsecretMounts:\n  - secretName: s\n",
            ),
        ]);
        assert_eq!(code, ExitCode::CannotTell, "{out}");
        assert_eq!(
            out,
            "values.yaml: fits the chart's schema\n\
             mine.yaml:2: watch.port: got string, want integer\n\
             mine.yaml:4: secretMounts[0]: missing property 'mountPath'\n"
        );
    }

    #[test]
    fn a_missing_file_is_said_and_the_others_still_judged() {
        let (out, code) = judged(&[("ok.yaml", "schedule: \"0 4 * * *\"\n")]);
        assert_eq!(code, ExitCode::Passed, "{out}");
        let (mut streams, captured) = Streams::captured();
        let code = run(&[PathBuf::from("/nonexistent/values.yaml")], &mut streams);
        assert_eq!(code, ExitCode::CannotTell);
        assert!(
            captured
                .out()
                .starts_with("/nonexistent/values.yaml: cannot be read")
        );
    }
}
