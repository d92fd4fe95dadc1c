//! The page of one fleet run: environment × gate, each verdict linking to that environment's
//! own page when it was written beside this one, and why an environment has no verdicts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{badge, escape, page};
use gates_engine::record::FleetRecord;

/// `pages` maps an environment to its own page's file name, relative to this page.
pub fn render(fleet: &FleetRecord, pages: &BTreeMap<String, String>) -> String {
    let matrix = fleet.matrix();
    let worst = fleet.exit_code();
    let mut b = String::new();
    let _ = write!(
        b,
        "<header><h1>{} Fleet: {} environments</h1><p class=\"sub\">{} · exit code {}</p></header>",
        badge(match worst {
            gates_core::exit::ExitCode::Passed => "pass",
            gates_core::exit::ExitCode::Failed => "fail",
            gates_core::exit::ExitCode::CannotTell | gates_core::exit::ExitCode::Signalled(_) => {
                "error"
            }
        }),
        matrix.rows.len(),
        escape(&fleet.started_at.to_rfc3339()),
        worst.code()
    );
    b.push_str("<section><h2>Gates</h2><table class=\"fleet\"><thead><tr><th>environment</th>");
    for gate in &matrix.gates {
        let _ = write!(b, "<th>gate {gate}</th>");
    }
    b.push_str("</tr></thead><tbody>");
    for row in &matrix.rows {
        let name = match pages.get(&row.environment) {
            Some(file) => format!(
                "<a href=\"{}\">{}</a>",
                escape(file),
                escape(&row.environment)
            ),
            None => escape(&row.environment),
        };
        let _ = write!(
            b,
            "<tr data-environment=\"{}\"><td>{name}</td>",
            escape(&row.environment)
        );
        match &row.instead {
            Some(why) => {
                let _ = write!(
                    b,
                    "<td colspan=\"{}\">{}</td>",
                    matrix.gates.len().max(1),
                    escape(why)
                );
            }
            None => {
                for cell in &row.cells {
                    match cell {
                        Some(verdict) => {
                            let _ = write!(b, "<td>{}</td>", badge(verdict.as_str()));
                        }
                        None => b.push_str("<td>–</td>"),
                    }
                }
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table></section><footer>Written by gates.</footer>");
    page(
        &format!("gates fleet: {} environments", matrix.rows.len()),
        &b,
    )
}
