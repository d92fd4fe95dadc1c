//! A fleet run on the terminal: each environment's notes held until its turn (the runs go on
//! at once, their blocks are printed in order), and the environment × gate table last.

use gates_engine::check::{CheckEvent, Reporter};
use gates_engine::record::FleetMatrix;

use super::notes::{notes_by_file, source_down_lines};

/// What one environment's check said on the way (its notes and unusable sources), held to be
/// printed with its block.
#[derive(Debug, Default)]
pub struct Held {
    pub lines: Vec<String>,
}

impl Reporter for Held {
    fn event(&mut self, event: CheckEvent<'_>) {
        match event {
            CheckEvent::RepositoryNotes(notes) => {
                self.lines
                    .extend(notes_by_file(notes).lines().map(str::to_string));
            }
            CheckEvent::SnapshotNote(note) => self.lines.push(format!("note: {note}")),
            CheckEvent::SourceDown {
                environment,
                source,
                reason,
            } => self
                .lines
                .extend(source_down_lines(environment, source, reason)),
            // The trial lines are printed from the record once the environment is done.
            CheckEvent::TrialFinished(_) | CheckEvent::RunFinished(_) => {}
        }
    }
}

/// The table, columns aligned: `pass`, `FAIL`, `ERROR`, `skip` (libtest's words) and `-`
/// where a gate does not apply; a row with no verdicts says why instead.
pub fn table(matrix: &FleetMatrix) -> String {
    let mut rows: Vec<Vec<String>> = vec![
        std::iter::once("environment".to_string())
            .chain(matrix.gates.iter().map(|g| format!("gate {g}")))
            .collect(),
    ];
    let mut instead = Vec::new();
    for row in &matrix.rows {
        let mut cells = vec![row.environment.clone()];
        match &row.instead {
            Some(why) => instead.push((rows.len(), why.clone())),
            None => cells.extend(row.cells.iter().map(|cell| match cell {
                Some(verdict) => word(*verdict).to_string(),
                None => "-".to_string(),
            })),
        }
        rows.push(cells);
    }
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (index, row) in rows.iter().enumerate() {
        let mut line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        if let Some((_, why)) = instead.iter().find(|(i, _)| *i == index) {
            line.push(why.clone());
        }
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn word(verdict: gates_core::verdict::Verdict) -> &'static str {
    use gates_core::verdict::Verdict;
    match verdict {
        Verdict::Pass => "pass",
        Verdict::Fail => "FAIL",
        Verdict::Error => "ERROR",
        Verdict::Skip => "skip",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gates_core::verdict::Verdict;
    use gates_engine::record::FleetRow;

    #[test]
    fn the_table_aligns_each_gate_and_says_why_a_row_has_no_verdicts() {
        let matrix = FleetMatrix {
            gates: vec![1, 5],
            rows: vec![
                FleetRow {
                    environment: "production".into(),
                    cells: vec![Some(Verdict::Pass), Some(Verdict::Fail)],
                    instead: None,
                },
                FleetRow {
                    environment: "staging".into(),
                    cells: vec![Some(Verdict::Error), None],
                    instead: None,
                },
                FleetRow {
                    environment: "edge".into(),
                    cells: vec![None, None],
                    instead: Some("error: no kubeconfig".into()),
                },
            ],
        };
        assert_eq!(
            table(&matrix),
            "environment  gate 1  gate 5\n\
             production   pass    FAIL\n\
             staging      ERROR   -\n\
             edge         error: no kubeconfig\n"
        );
    }
}
