//! The HTML report: one self-contained page per `check` and `chaos` run, written beside its
//! JUnit, for people rather than dashboards. Styles are inline and there is no script, so the
//! page opens from a CI artifact or an e-mail with no network, prints as it shows, and cannot
//! fail to render because something did not load. Verdicts carry a word as well as a colour,
//! and the colours (Okabe–Ito) stay apart for colour-blind readers and in greyscale print.

pub mod chaos;
pub mod check;
pub mod fleet;
pub mod prediction;
pub mod timeline;

use std::fmt::Write as _;

/// Escape text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One of the four verdict words, as a report reads it (`pass`, `fail`, `error`, `skip`);
/// anything else is shown as what it says, styled like an error.
pub fn badge(verdict: &str) -> String {
    let class = match verdict {
        "pass" | "fail" | "error" | "skip" => verdict,
        _ => "error",
    };
    format!(
        "<span class=\"badge {class}\">{}</span>",
        escape(&verdict.to_uppercase())
    )
}

/// The whole page around a body.
pub fn page(title: &str, body: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"gates\">\n<title>{}</title>\n<style>\n{STYLE}</style>\n\
         </head>\n<body>\n{body}\n</body>\n</html>\n",
        escape(title)
    );
    out
}

/// Evidence and warnings of one finding: open when it failed or erred, folded otherwise.
pub fn evidence(verdict: &str, evidence: &[String], warnings: &[String]) -> String {
    if evidence.is_empty() && warnings.is_empty() {
        return String::new();
    }
    let open = if matches!(verdict, "fail" | "error") {
        " open"
    } else {
        ""
    };
    let mut out = format!("<details{open}><summary>evidence</summary><pre>");
    for line in evidence {
        let _ = writeln!(out, "{}", escape(line));
    }
    for line in warnings {
        let _ = writeln!(out, "warning: {}", escape(line));
    }
    out.push_str("</pre></details>");
    out
}

const STYLE: &str = r#"
:root {
  --ink: #1a1a1a; --muted: #555; --rule: #c8c8c8; --paper: #fff; --wash: #f4f4f4;
  --pass: #009E73; --fail: #D55E00; --error: #CC79A7; --skip: #999999;
  --fault: #000000; --restore: #0072B2; --recovered: #009E73;
}
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
  color: var(--ink); background: var(--paper); margin: 0 auto; max-width: 1100px;
  padding: 1.5rem; -webkit-print-color-adjust: exact; print-color-adjust: exact; }
h1 { font-size: 1.45rem; margin: 0 0 .25rem; }
h2 { font-size: 1.15rem; margin: 1.6rem 0 .5rem; border-bottom: 1px solid var(--rule); }
p.sub { color: var(--muted); margin: 0 0 1rem; }
table { border-collapse: collapse; width: 100%; margin: .25rem 0 1rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--rule);
  vertical-align: top; }
th { background: var(--wash); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
pre { background: var(--wash); padding: .5rem; margin: .25rem 0; white-space: pre-wrap;
  word-break: break-word; }
details > summary { cursor: pointer; color: var(--muted); }
.badge { display: inline-block; min-width: 4.2em; text-align: center; font-weight: 700;
  font-size: .8rem; letter-spacing: .04em; padding: .1rem .4rem; border-radius: 3px;
  border: 2px solid; background: var(--paper); }
.badge.pass { border-color: var(--pass); color: #00583f; }
.badge.fail { border-color: var(--fail); color: #8a3a00; background: #fbe9dd; }
.badge.error { border-color: var(--error); color: #7a2f5c; background: #f7e6f0; }
.badge.skip { border-color: var(--skip); color: #444; border-style: dashed; }
.over { color: #8a3a00; font-weight: 700; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.legend { display: flex; flex-wrap: wrap; gap: 1.2rem; font-size: .85rem; margin: .25rem 0; }
.legend svg { vertical-align: middle; margin-right: .3rem; }
figure { margin: 0; }
svg.timeline { width: 100%; height: auto; border: 1px solid var(--rule); background: #fff; }
svg.timeline text { font: 12px "DejaVu Sans", system-ui, sans-serif; fill: var(--ink); }
svg.timeline text.lane-label { font-weight: 600; }
svg.timeline text.tick { fill: var(--muted); font-size: 11px; }
svg.timeline text.handover { font-size: 11px; }
svg.timeline .sampled { fill: #e3f3ec; stroke: none; }
svg.timeline .outage { fill: var(--fail); }
svg.timeline .unknown { fill: url(#unknown-hatch); stroke: #767676; stroke-width: .5; }
svg.timeline .grid { stroke: #e2e2e2; stroke-width: 1; }
/* Marks and grid lines let the pointer through to the intervals and their tooltips. */
svg.timeline .grid, svg.timeline .mark { pointer-events: none; }
svg.timeline .mark line { stroke-width: 2; }
svg.timeline .mark.fault line { stroke: var(--fault); }
svg.timeline .mark.restore line { stroke: var(--restore); stroke-dasharray: 6 3; }
svg.timeline .mark.running-again line { stroke: var(--restore); stroke-dasharray: 2 3; }
svg.timeline .mark.recovered line { stroke: var(--recovered); stroke-dasharray: 2 3; }
svg.timeline .event { stroke: var(--paper); stroke-width: 1; }
svg.timeline .event.harness { fill: var(--fault); }
svg.timeline .event.nodes { fill: var(--restore); }
svg.timeline .event.handovers { fill: #E69F00; }
svg.timeline .event.pods { fill: var(--error); }
svg.timeline .event.other { fill: var(--skip); }
table.prediction caption { text-align: left; color: var(--muted); padding: .2rem 0; }
.agree { display: inline-block; white-space: nowrap; font-weight: 700; font-size: .8rem;
  padding: .05rem .4rem; border-radius: 3px; border: 2px solid; }
.agree.yes { border-color: var(--pass); color: #00583f; }
.agree.no { border-color: var(--fail); color: #8a3a00; background: #fbe9dd; }
.agree.none { border-color: var(--skip); color: #444; border-style: dashed; }
.outcome.survives { color: #00583f; } .outcome.degraded { color: #6b4a00; }
.outcome.lost { color: #8a3a00; } .outcome.unknown { color: #7a2f5c; }
footer { margin-top: 2rem; color: var(--muted); font-size: .8rem; }
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  h2 { break-after: avoid; }
  figure, table, tr, details { break-inside: avoid; }
  details > summary { display: none; }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_content_and_attributes() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn a_verdict_the_page_does_not_know_is_styled_as_an_error_and_keeps_its_word() {
        assert_eq!(badge("pass"), "<span class=\"badge pass\">PASS</span>");
        assert_eq!(badge("odd"), "<span class=\"badge error\">ODD</span>");
    }

    #[test]
    fn evidence_of_a_failure_is_open_and_of_a_pass_is_folded() {
        let lines = vec!["kube-system/coredns-1 on pve1".to_string()];
        assert!(evidence("fail", &lines, &[]).starts_with("<details open>"));
        assert!(evidence("pass", &lines, &[]).starts_with("<details>"));
        assert_eq!(evidence("pass", &[], &[]), "");
    }
}
