//! SARIF 2.1.0 for code scanning (`gates check --sarif FILE`): the repository and drift
//! trials of a run as one SARIF `run`, so that GitHub (or any SARIF viewer) shows a broken
//! gate on the pull request's lines.
//!
//! - `tool.driver.rules`: one rule per trial kind, the name after `repo::` or `drift::`
//!   (`replicated-controller`, `vip`), described in the words of
//!   [`crate::repo::trials::about`] and tagged with the gates (`gate3`) and the sides
//!   (`repository`, `drift`) whose trials of that kind ran.
//! - `results`: one per failing or erroring trial, sorted by trial name; passes and skips are
//!   not results. [`level`] says how a verdict maps.
//! - locations: every `path:line` the trial's summary, evidence and warnings cite
//!   ([`cited`]), repository-relative under `uriBaseId` `SRCROOT`, deduplicated; a line of 0
//!   names the whole file, so it gets no region. A trial that cites no file of the
//!   repository has no locations (SARIF allows that; GitHub then shows the result without
//!   annotating a line).
//!
//! `originalUriBaseIds` is left out: the log then names no path of the machine that wrote
//! it, and GitHub resolves `SRCROOT`-relative URIs against the checkout it is uploaded from.
//! Live-only trials are not in the log: they are about a cluster, not about lines of the
//! repository.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::{Component, Path};

use serde_json::{Map, Value, json};

use super::Run;
use crate::runner::TrialResult;
use crate::verdict::Verdict;

/// The `$schema` of the log: the OASIS SARIF 2.1.0 schema (`tests/schemas` has a copy).
const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// The base every artifact URI is relative to: the repository's root.
const SRCROOT: &str = "SRCROOT";

/// A `path:line` that a line of text cites, the path as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cited {
    pub path: String,
    /// 0 names the whole file.
    pub line: u32,
}

/// The SARIF log of `run`'s repository and drift trials. `root` is the repository's
/// checkout: when given, only files that exist under it become locations, so a
/// `host:port` that merely looks like a path is never one.
pub fn render(run: &Run, root: Option<&Path>) -> String {
    let mut out = Vec::new();
    // Writing to memory cannot fail.
    let _ = write(&mut out, run, root);
    String::from_utf8_lossy(&out).into_owned()
}

/// [`render`] into `out`.
pub fn write(out: &mut dyn Write, run: &Run, root: Option<&Path>) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &log(run, root))?;
    out.write_all(b"\n")
}

/// How a verdict shows in code scanning: a fail is an `error` (the change breaks a gate),
/// an error verdict a `warning`, since it means gates could not judge the trial (a file it
/// could not read, a value it cannot know), not that the gate is broken; pass and skip are
/// no result at all.
pub fn level(verdict: Verdict) -> Option<&'static str> {
    match verdict {
        Verdict::Fail => Some("error"),
        Verdict::Error => Some("warning"),
        Verdict::Pass | Verdict::Skip => None,
    }
}

/// `("repo", "vip")` for a repository trial's kind `repo::vip`, `("drift", "pdb")` for a
/// drift trial's; `None` for a live trial.
fn side_and_name(trial: &TrialResult) -> Option<(&str, &str)> {
    match trial.kind.split_once("::")? {
        (side @ ("repo" | "drift"), name) => Some((side, name)),
        _ => None,
    }
}

fn log(run: &Run, root: Option<&Path>) -> Value {
    let mut trials: Vec<(&TrialResult, &str, &str)> = run
        .trials
        .iter()
        .filter_map(|t| side_and_name(t).map(|(side, name)| (t, side, name)))
        .collect();
    trials.sort_by(|a, b| a.0.name.cmp(&b.0.name));

    // Every kind that ran, pass or not, with the gates and sides it ran for.
    let mut kinds: BTreeMap<&str, (BTreeSet<u32>, BTreeSet<&str>)> = BTreeMap::new();
    for (trial, side, name) in &trials {
        let entry = kinds.entry(name).or_default();
        entry.0.insert(trial.gate);
        entry.1.insert(side);
    }
    let index: BTreeMap<&str, usize> = kinds.keys().enumerate().map(|(i, k)| (*k, i)).collect();
    let rules: Vec<Value> = kinds
        .iter()
        .map(|(name, (gates, sides))| rule(name, gates, sides))
        .collect();

    let results: Vec<Value> = trials
        .iter()
        .filter_map(|(trial, _, name)| {
            let level = level(trial.finding.verdict)?;
            let mut result = Map::new();
            result.insert("ruleId".into(), json!(name));
            result.insert("ruleIndex".into(), json!(index[name]));
            result.insert("level".into(), json!(level));
            result.insert("message".into(), json!({ "text": trial.finding.summary }));
            let locations = locations(trial, root);
            if !locations.is_empty() {
                result.insert("locations".into(), Value::Array(locations));
            }
            result.insert(
                "properties".into(),
                json!({
                    "trial": trial.name,
                    "gate": trial.gate,
                    "verdict": trial.finding.verdict.as_str(),
                    "evidence": trial.finding.evidence,
                    "warnings": trial.finding.warnings,
                }),
            );
            Some(Value::Object(result))
        })
        .collect();

    let mut driver = Map::new();
    driver.insert("name".into(), json!("gates"));
    driver.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    driver.insert("semanticVersion".into(), json!(env!("CARGO_PKG_VERSION")));
    if let Some(uri) = information_uri() {
        driver.insert("informationUri".into(), json!(uri));
    }
    driver.insert("rules".into(), Value::Array(rules));

    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": driver },
            "results": results,
            "properties": {
                "environment": run.environment,
                "decision": run.decision,
            },
        }],
    })
}

/// Where to read about gates: the package's homepage or repository, when Cargo.toml names
/// one (an absolute URI, as SARIF requires).
fn information_uri() -> Option<&'static str> {
    [env!("CARGO_PKG_HOMEPAGE"), env!("CARGO_PKG_REPOSITORY")]
        .into_iter()
        .find(|uri| !uri.is_empty())
}

fn rule(name: &str, gates: &BTreeSet<u32>, sides: &BTreeSet<&str>) -> Value {
    let about = crate::repo::trials::about(name).map_or_else(|| name.to_string(), capitalised);
    let mut full = format!("{about}.");
    if sides.contains("repo") {
        full.push_str(&format!(
            " A repository trial (gateN::ENV::repo::{name}) judges what the repository declares \
             for an environment."
        ));
    }
    if sides.contains("drift") {
        full.push_str(&format!(
            " A drift trial (gateN::ENV::drift::{name}) fails where the cluster and the \
             repository disagree about it."
        ));
    }
    full.push_str(
        " A failure is an error; a warning means gates could not judge the trial, e.g. a file \
         it could not read.",
    );
    let help = format!(
        "{full} `gates check ENV --repo PATH` prints each trial's whole evidence, every line \
         naming the file and line it comes from."
    );
    let mut tags: Vec<String> = gates.iter().map(|g| format!("gate{g}")).collect();
    tags.extend(sides.iter().map(|s| {
        if *s == "repo" {
            "repository".to_string()
        } else {
            s.to_string()
        }
    }));
    json!({
        "id": name,
        "shortDescription": { "text": about },
        "fullDescription": { "text": full },
        "help": { "text": help },
        "defaultConfiguration": { "level": "error" },
        "properties": { "tags": tags },
    })
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The trial's locations: each file and line it cites, once, in the order first cited.
fn locations(trial: &TrialResult, root: Option<&Path>) -> Vec<Value> {
    let mut seen = BTreeSet::new();
    cited(&trial.finding.details())
        .into_iter()
        .filter_map(|c| {
            let path = in_repository(&c.path, root)?;
            Some(Cited { path, line: c.line })
        })
        .filter(|c| seen.insert(c.clone()))
        .map(|c| {
            let mut physical = Map::new();
            physical.insert(
                "artifactLocation".into(),
                json!({ "uri": c.path, "uriBaseId": SRCROOT }),
            );
            if c.line > 0 {
                physical.insert("region".into(), json!({ "startLine": c.line }));
            }
            json!({ "physicalLocation": physical })
        })
        .collect()
}

/// `path` as a repository-relative URI path: `./` and the root itself taken off, refused
/// when it leaves the repository (`..`), is absolute outside `root`, or (with `root`) names
/// no file there.
fn in_repository(path: &str, root: Option<&Path>) -> Option<String> {
    let given = Path::new(path);
    let relative = if given.is_absolute() {
        let root = root?;
        given
            .strip_prefix(root)
            .ok()
            .or_else(|| given.strip_prefix(root.canonicalize().ok()?).ok())?
            .to_path_buf()
    } else {
        given.to_path_buf()
    };
    let mut parts = Vec::new();
    for part in relative.components() {
        match part {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    if parts.is_empty() {
        return None;
    }
    let relative = parts.join("/");
    match root {
        Some(root) if !root.join(&relative).is_file() => None,
        _ => Some(relative),
    }
}

/// The characters a cited path is made of: what repository paths use, and nothing a URI
/// path would need escaped.
fn path_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'/' | b'_' | b'-' | b'+' | b'@' | b'~')
}

/// Every `path:line` in `text`, in order: evidence reads `path:line: key: value`, and a
/// path may also stand inside a sentence or parentheses (`(release.yaml:6)`, `at
/// values.yaml:78 (in effect ...)`).
///
/// A citation is a run of path characters that names a file (it has a `/` or a `.` and a
/// letter), is not itself preceded by a `:` (the port of `https://host:443`), then `:` and
/// the decimal line, not followed by a letter, digit or `.digit` (an image tag
/// `traefik:3.1`, a time `12:30`, a `host:port` with no letter in the host). `path:12:5:`
/// (line, then column) cites line 12. A line too large for a `u32` is no citation.
pub fn cited(text: &str) -> Vec<Cited> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !path_char(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && path_char(bytes[i]) {
            i += 1;
        }
        let path = &text[start..i];
        let after_colon = start > 0 && bytes[start - 1] == b':';
        if after_colon || bytes.get(i) != Some(&b':') || !names_a_file(path) {
            continue;
        }
        let digits = i + 1;
        let mut end = digits;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        if end == digits {
            continue;
        }
        let next = bytes.get(end).copied();
        let decimal = next == Some(b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit);
        let glued = next.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
        if decimal || glued {
            i = end;
            continue;
        }
        if let Ok(line) = text[digits..end].parse::<u32>() {
            out.push(Cited {
                path: path.to_string(),
                line,
            });
        }
        i = end;
    }
    out
}

/// A path, not a word or an address: it has a directory or an extension, and a letter.
fn names_a_file(path: &str) -> bool {
    (path.contains('/') || path.contains('.'))
        && path.bytes().any(|c| c.is_ascii_alphabetic())
        && !path.ends_with('/')
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::Value;

    use super::{Cited, cited, in_repository};
    use crate::checks::testing::{env, state};
    use crate::output::report::Run;
    use crate::runner::{Tally, TrialResult};
    use crate::state::provenance::Provenance;
    use crate::verdict::Finding;

    fn trial(name: &str, kind: &'static str, finding: Finding) -> TrialResult {
        TrialResult {
            name: name.to_string(),
            gate: name[4..5].parse().unwrap(),
            kind: kind.into(),
            instance: None,
            finding,
            duration: Duration::ZERO,
        }
    }

    fn log(trials: Vec<TrialResult>) -> Value {
        let state = state().build();
        let run = Run {
            schema_version: gates_core::schema::SCHEMA_VERSION,
            provenance: Some(Provenance::of(&env(), &state, state.collected_at)),
            environment: "staging".to_string(),
            decision: "adr-007".to_string(),
            started_at: state.collected_at,
            source: state.source.clone(),
            collect_time: Duration::ZERO,
            tally: Tally::of(&trials),
            gates: Vec::new(),
            trials,
            promotion: None,
        };
        serde_json::from_str(&super::render(&run, None)).unwrap()
    }

    #[test]
    fn failing_and_erroring_repository_and_drift_trials_are_the_results_sorted_by_name() {
        let log = log(vec![
            trial(
                "gate3::staging::repo::l2-announcement",
                "repo::l2-announcement",
                Finding::fail("not every node").with_evidence([
                    "k/policy.yaml:19: spec.nodeSelector",
                    "again (k/policy.yaml:19: spec.nodeSelector)",
                    "k/whole.yaml:0: read",
                ]),
            ),
            trial(
                "gate1::staging::control-plane-nodes",
                "control-plane-nodes",
                Finding::fail("live only").with_evidence(["k/live.yaml:1: x"]),
            ),
            trial(
                "gate1::staging::drift::vip",
                "drift::vip",
                Finding::error("the live VIP could not be read")
                    .with_evidence(["declared: talos/cp.yaml:8: vip.ip: 10.0.50.10"]),
            ),
            trial(
                "gate1::staging::repo::vip",
                "repo::vip",
                Finding::pass("fine").with_evidence(["talos/cp.yaml:8: vip.ip"]),
            ),
            trial(
                "gate2::staging::repo::capacity-headroom",
                "repo::capacity-headroom",
                Finding::skip("unknown"),
            ),
            trial(
                "gate1::staging::repo::schedulable-control-plane",
                "repo::schedulable-control-plane",
                Finding::fail("no file named"),
            ),
        ]);
        assert_eq!(log["version"], "2.1.0");
        let run = &log["runs"][0];
        let rules: Vec<&str> = run["tool"]["driver"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            rules,
            [
                "capacity-headroom",
                "l2-announcement",
                "schedulable-control-plane",
                "vip"
            ],
            "every repository and drift kind that ran, no live one"
        );
        let vip = &run["tool"]["driver"]["rules"][3];
        assert_eq!(
            vip["properties"]["tags"],
            serde_json::json!(["gate1", "drift", "repository"])
        );
        let results = run["results"].as_array().unwrap();
        let summary: Vec<(&str, &str, &str, u64)> = results
            .iter()
            .map(|r| {
                (
                    r["properties"]["trial"].as_str().unwrap(),
                    r["ruleId"].as_str().unwrap(),
                    r["level"].as_str().unwrap(),
                    r["ruleIndex"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("gate1::staging::drift::vip", "vip", "warning", 3),
                (
                    "gate1::staging::repo::schedulable-control-plane",
                    "schedulable-control-plane",
                    "error",
                    2
                ),
                (
                    "gate3::staging::repo::l2-announcement",
                    "l2-announcement",
                    "error",
                    1
                ),
            ]
        );
        assert_eq!(
            results[0]["message"]["text"],
            "the live VIP could not be read"
        );
        assert_eq!(
            results[0]["locations"][0]["physicalLocation"],
            serde_json::json!({
                "artifactLocation": {"uri": "talos/cp.yaml", "uriBaseId": "SRCROOT"},
                "region": {"startLine": 8},
            })
        );
        assert!(
            results[1].get("locations").is_none(),
            "a trial naming no file has no locations"
        );
        let l2: Vec<&Value> = results[2]["locations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| &l["physicalLocation"])
            .collect();
        assert_eq!(
            l2,
            [
                &serde_json::json!({
                    "artifactLocation": {"uri": "k/policy.yaml", "uriBaseId": "SRCROOT"},
                    "region": {"startLine": 19},
                }),
                &serde_json::json!({
                    "artifactLocation": {"uri": "k/whole.yaml", "uriBaseId": "SRCROOT"},
                }),
            ],
            "the line cited twice is one location; line 0 is the whole file"
        );
    }

    fn at(path: &str, line: u32) -> Cited {
        Cited {
            path: path.to_string(),
            line,
        }
    }

    #[test]
    fn an_evidence_line_cites_the_path_and_line_it_starts_with() {
        assert_eq!(
            cited(
                "kubernetes/infrastructure/controllers/traefik/release.yaml:78: traefik/traefik \
                 spec.values.service.spec.externalTrafficPolicy: Local"
            ),
            [at(
                "kubernetes/infrastructure/controllers/traefik/release.yaml",
                78
            )]
        );
    }

    #[test]
    fn paths_inside_a_sentence_or_parentheses_are_cited_each_in_order() {
        assert_eq!(
            cited(
                "leave out cp-01 (policy ingress-address (kubernetes/network/ingress-address.yaml:19: \
                 spec.nodeSelector) requires x), Service traefik/traefik (release.yaml:6): its IPs; \
                 the shared values say Local at values.yaml:78 (in effect for production)"
            ),
            [
                at("kubernetes/network/ingress-address.yaml", 19),
                at("release.yaml", 6),
                at("values.yaml", 78),
            ]
        );
    }

    #[test]
    fn a_line_of_zero_is_kept_to_name_the_whole_file() {
        assert_eq!(
            cited("talos/common.yaml:0: read"),
            [at("talos/common.yaml", 0)]
        );
    }

    #[test]
    fn a_path_without_a_line_is_no_citation() {
        assert_eq!(cited("talos/staging/common.yaml: Talos patch read"), []);
        assert_eq!(cited("terraform/main.tf:: empty"), []);
    }

    #[test]
    fn a_line_and_column_cite_the_line() {
        assert_eq!(cited("main.tf:12:5: error"), [at("main.tf", 12)]);
    }

    #[test]
    fn addresses_ports_times_and_image_tags_are_not_cited() {
        for text in [
            "endpoints: [10.0.50.11:6443]",
            "https://api.example.com:6443/readyz",
            "pve1:22 answered",
            "at 12:30: done",
            "image traefik:3.1.2 and ghcr.io/org/app:1.2",
            "key: value",
            "kubernetes/apps:12abc",
            "a line too large: x.yaml:99999999999:",
        ] {
            assert_eq!(cited(text), [], "{text}");
        }
    }

    #[test]
    fn a_path_that_leaves_the_repository_or_is_absolute_without_a_root_has_no_location() {
        assert_eq!(in_repository("../secrets.yaml", None), None);
        assert_eq!(in_repository("a/../../b.yaml", None), None);
        assert_eq!(in_repository("/etc/passwd", None), None);
        assert_eq!(
            in_repository("./kubernetes/x.yaml", None).as_deref(),
            Some("kubernetes/x.yaml")
        );
    }

    #[test]
    fn with_a_root_only_files_that_exist_under_it_are_locations() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("kubernetes")).unwrap();
        std::fs::write(root.path().join("kubernetes/x.yaml"), "a: 1\n").unwrap();
        let some = Some(root.path());
        assert_eq!(
            in_repository("kubernetes/x.yaml", some).as_deref(),
            Some("kubernetes/x.yaml")
        );
        assert_eq!(in_repository("api.example.com", some), None);
        let absolute = root.path().join("kubernetes/x.yaml");
        assert_eq!(
            in_repository(absolute.to_str().unwrap(), some).as_deref(),
            Some("kubernetes/x.yaml")
        );
    }
}
