//! Jinja-templated Talos patches (`*.yaml.j2`, rendered by minijinja-cli or `just template`
//! before `talosctl` reads them). A template whose only Jinja is `{{ ... }}` interpolations is
//! read: every value an interpolation writes is *unknown* (set aside with its file, line and
//! expression) and everything else is read as written. Control flow (`{% if %}`, `{% elif %}`,
//! `{% else %}`) and comments are rendered when the environment names the variables the
//! repository's render step gives each role (`repo.template_env`, minijinja-cli's `ENV`): each
//! condition is evaluated by minijinja, the engine minijinja-cli is built on, and the branches
//! not taken are blanked line for line, so every line keeps its number for evidence. A
//! condition over a variable not given, other tags (`for`, `set`, macros) and an interpolation
//! inside a key leave the whole template unread: what it renders then depends on values gates
//! does not have.

use std::collections::BTreeMap;

use crate::repo::site::Site;
use crate::repo::yaml::{Node, Value};

gates_core::sentence_error! {
    /// Why a Jinja Talos template is not read: what gates cannot render, with the line.
    pub struct TemplateError;
}

// A value a template writes is a plain record of the declared state: it lives in core.
pub use gates_core::declared::talos::Unknown;

const TOKEN: &str = "__gates_unknown_";

/// The placeholder for the `n`th value not known, plain text to YAML.
pub fn token(n: usize) -> String {
    format!("{TOKEN}{n}__")
}

/// The template's text with each interpolation replaced by a placeholder YAML reads as plain
/// text, and the interpolations in order; `Err`: why the template is not read. `known`: the
/// variables the render step gives: an interpolation over nothing else (`{{ ENV.NAME }}`,
/// `{{ 'm' if ENV.NAME == 'controlplane' else 'w' }}`) is evaluated by minijinja and written
/// as it renders.
pub fn placeholders(
    text: &str,
    known: Option<&BTreeMap<String, String>>,
) -> Result<(String, Vec<String>), TemplateError> {
    if text.contains("{%") || text.contains("{#") {
        return Err(TemplateError(format!(
            "a Jinja template with {} gates renders only with repo.template_env (the \
             variables your render step gives each role, such as MACHINE_TYPE)",
            if text.contains("{%") {
                "control flow ({% ... %})"
            } else {
                "comments ({# ... #})"
            }
        )));
    }
    let mut out = String::with_capacity(text.len());
    let mut exprs = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            return Err("an unclosed {{ in the template".into());
        };
        out.push_str(&rest[..start]);
        let expr =
            rest[start + 2..start + len].trim_matches(|c: char| c == '-' || c.is_whitespace());
        match known.and_then(|vars| evaluate(expr, vars)) {
            Some(value) => out.push_str(&value),
            None => {
                out.push_str(&token(exprs.len()));
                exprs.push(format!("the Jinja interpolation `{{{{ {expr} }}}}`"));
            }
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    Ok((out, exprs))
}

/// What an expression over `vars` alone renders as; `None` when it reads anything else.
fn evaluate(expr: &str, vars: &BTreeMap<String, String>) -> Option<String> {
    let value = eval(expr, vars).ok()?;
    // Strict undefined errors only where a missing value is used; one rendered as the whole
    // interpolation comes back undefined.
    (!value.is_undefined() && !value.is_none()).then(|| value.to_string())
}

/// One Jinja expression evaluated by minijinja over `ENV` = `vars`, missing values strict.
/// minijinja 2.24's expression lexer panics ("empty lexer stack") on an expression holding a
/// closing delimiter followed by text (`-}}x`; found by fuzzing this module), so an expression
/// holding any delimiter is refused before it reaches minijinja, and a panic that still
/// escapes is an error, not the end of the run.
fn eval(expr: &str, vars: &BTreeMap<String, String>) -> Result<minijinja::Value, TemplateError> {
    const DELIMITERS: [&str; 6] = ["{{", "}}", "{%", "%}", "{#", "#}"];
    if DELIMITERS.iter().any(|d| expr.contains(d)) {
        return Err("a Jinja delimiter inside an expression".into());
    }
    let run = || {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        let compiled = env
            .compile_expression(expr)
            .map_err(|e| e.kind().to_string())?;
        compiled
            .eval(minijinja::context! { ENV => vars })
            .map_err(|e| e.kind().to_string())
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        .unwrap_or_else(|_| Err("minijinja could not parse it".to_string()))
        .map_err(TemplateError)
}

/// The template with its `if`/`elif`/`else` rendered for `vars` (minijinja-cli's `ENV`) and its
/// comments removed; every line keeps its number (a branch not taken and each tag leave only
/// their line breaks). Interpolations stay for [`placeholders`]. `Err`: why it is not read,
/// with the line.
pub fn render(text: &str, vars: &BTreeMap<String, String>) -> Result<String, TemplateError> {
    let mut stack: Vec<Frame> = Vec::new();
    let on = |stack: &[Frame]| stack.last().is_none_or(|f| f.on);
    let line_at = |pos: usize| text[..pos].matches('\n').count() + 1;
    let blank = |out: &mut String, part: &str| out.extend(part.chars().filter(|c| *c == '\n'));
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(found) = text[pos..].find(['{']).map(|i| pos + i) {
        let open = &text[found..];
        let close = if open.starts_with("{%") {
            "%}"
        } else if open.starts_with("{#") {
            "#}"
        } else {
            let upto = found + 1;
            match on(&stack) {
                true => out.push_str(&text[pos..upto]),
                false => blank(&mut out, &text[pos..upto]),
            }
            pos = upto;
            continue;
        };
        match on(&stack) {
            true => out.push_str(&text[pos..found]),
            false => blank(&mut out, &text[pos..found]),
        }
        let line = line_at(found);
        let Some(len) = open[2..].find(close) else {
            return Err(TemplateError(format!(
                "line {line}: an unclosed {}",
                &open[..2]
            )));
        };
        let tag = &open[..len + 4];
        blank(&mut out, tag);
        pos = found + len + 4;
        if close == "#}" {
            continue;
        }
        let body =
            tag[2..tag.len() - 2].trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        let (word, cond) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
        branch(&mut stack, word, cond, line, vars)?;
    }
    if let Some(rest) = text.get(pos..) {
        match on(&stack) {
            true => out.push_str(rest),
            false => blank(&mut out, rest),
        }
    }
    if !stack.is_empty() {
        return Err("an `{% if %}` without its `{% endif %}`".into());
    }
    Ok(out)
}

/// Per open `if`: whether its enclosing text is rendered, whether a branch was taken, and
/// whether the current branch is rendered.
struct Frame {
    outer: bool,
    taken: bool,
    on: bool,
}

/// One `{% ... %}` tag at `line`: an `if`, `elif` or `else` opens or moves to a branch whose
/// condition `vars` decide, an `endif` closes it; any other tag is refused.
fn branch(
    stack: &mut Vec<Frame>,
    word: &str,
    cond: &str,
    line: usize,
    vars: &BTreeMap<String, String>,
) -> Result<(), TemplateError> {
    let test = |cond: &str| -> Result<bool, TemplateError> {
        eval(cond, vars).map(|v| v.is_true()).map_err(|why| {
            TemplateError(format!(
                "line {line}: the condition `{cond}` cannot be evaluated with repo.template_env: {why}"
            ))
        })
    };
    match word {
        "if" => {
            let outer = stack.last().is_none_or(|f| f.on);
            let holds = outer && test(cond)?;
            stack.push(Frame {
                outer,
                taken: holds,
                on: holds,
            });
        }
        "elif" | "else" => {
            let Some(frame) = stack.last_mut() else {
                return Err(TemplateError(format!(
                    "line {line}: `{{% {word} %}}` without an `if`"
                )));
            };
            let holds = frame.outer && !frame.taken && (word == "else" || test(cond)?);
            frame.taken |= holds;
            frame.on = holds;
        }
        "endif" => {
            if stack.pop().is_none() {
                return Err(TemplateError(format!(
                    "line {line}: `{{% endif %}}` without an `if`"
                )));
            }
        }
        other => {
            return Err(TemplateError(format!(
                "line {line}: `{{% {other} %}}`: gates renders only if, elif and else"
            )));
        }
    }
    Ok(())
}

/// Take the values the interpolations wrote out of a parsed document (`exprs`: what wrote
/// each placeholder, see [`token`]): a mapping entry holding one is removed, a list item holding one becomes null; each is returned as
/// [`Unknown`]. `Err`: an interpolation in a key, which makes the document's shape unknown.
pub fn set_aside(doc: &mut Node, exprs: &[String]) -> Result<Vec<Unknown>, TemplateError> {
    let kind = doc
        .get_str(&["kind"])
        .filter(|k| !k.contains(TOKEN))
        .unwrap_or("v1alpha1")
        .to_string();
    let mut out = Vec::new();
    walk(doc, &mut Vec::new(), &kind, exprs, &mut out)?;
    Ok(out)
}

fn walk(
    node: &mut Node,
    path: &mut Vec<String>,
    kind: &str,
    exprs: &[String],
    out: &mut Vec<Unknown>,
) -> Result<(), TemplateError> {
    match &mut node.value {
        Value::Map(entries) => {
            let mut kept = Vec::with_capacity(entries.len());
            for (key, mut value) in std::mem::take(entries) {
                if key.contains(TOKEN) {
                    return Err(TemplateError(format!(
                        "{}: a Jinja interpolation in a key gates does not render",
                        value.site
                    )));
                }
                path.push(key.clone());
                match written(&value, exprs) {
                    Some(found) => out.push(unknown(&value.site, kind, path, found)),
                    None => {
                        walk(&mut value, path, kind, exprs, out)?;
                        kept.push((key, value));
                    }
                }
                path.pop();
            }
            *entries = kept;
        }
        Value::Seq(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push(format!("[{i}]"));
                match written(item, exprs) {
                    Some(found) => {
                        out.push(unknown(&item.site, kind, path, found));
                        item.value = Value::Null;
                    }
                    None => walk(item, path, kind, exprs, out)?,
                }
                path.pop();
            }
        }
        Value::Null | Value::Scalar(..) => {}
    }
    Ok(())
}

/// The interpolations a scalar holds, if any.
fn written(node: &Node, exprs: &[String]) -> Option<Vec<String>> {
    let Value::Scalar(text, _) = &node.value else {
        return None;
    };
    let found: Vec<String> = text
        .split(TOKEN)
        .skip(1)
        .filter_map(|rest| rest.split("__").next()?.parse::<usize>().ok())
        .filter_map(|n| exprs.get(n).cloned())
        .collect();
    (!found.is_empty()).then_some(found)
}

fn unknown(site: &Site, kind: &str, path: &[String], exprs: Vec<String>) -> Unknown {
    Unknown {
        site: site.clone(),
        kind: kind.to_string(),
        path: path.join(".").replace(".[", "["),
        exprs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::repo::yaml;

    fn read(text: &str) -> (Vec<Node>, Vec<Unknown>) {
        let (text, exprs) = placeholders(text, None).unwrap();
        let mut docs = yaml::parse("talos/cluster.yaml.j2", &text).unwrap();
        let mut unknown = Vec::new();
        for doc in &mut docs {
            unknown.extend(set_aside(doc, &exprs).unwrap());
        }
        (docs, unknown)
    }

    #[test]
    fn an_interpolated_value_is_set_aside_with_its_line_and_the_rest_is_read_as_written() {
        let (docs, unknown) = read(
            "machine:\n  install:\n    image: factory.talos.dev/installer/{{ schematic }}:v1.9.0\n  certSANs: [a, \"{{ ENV.SAN }}\"]\ncluster:\n  allowSchedulingOnControlPlanes: true\n---\nkind: UnattendedInstallConfig\ninstaller:\n  image: {{ image }}\n",
        );
        assert_eq!(
            docs[0]
                .get(&["cluster", "allowSchedulingOnControlPlanes"])
                .and_then(Node::as_bool),
            Some(true)
        );
        assert!(docs[0].get(&["machine", "install", "image"]).is_none());
        let shown: Vec<String> = unknown.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "talos/cluster.yaml.j2:3: v1alpha1 machine.install.image is written by the Jinja interpolation `{{ schematic }}`, which gates does not evaluate",
                "talos/cluster.yaml.j2:4: v1alpha1 machine.certSANs[1] is written by the Jinja interpolation `{{ ENV.SAN }}`, which gates does not evaluate",
                "talos/cluster.yaml.j2:10: UnattendedInstallConfig installer.image is written by the Jinja interpolation `{{ image }}`, which gates does not evaluate",
            ]
        );
    }

    #[test]
    fn control_flow_comments_and_interpolated_keys_leave_the_template_unread() {
        assert!(
            placeholders("{% if x %}a: 1{% endif %}", None)
                .unwrap_err()
                .0
                .contains("control flow")
        );
        assert!(
            placeholders("{# note #}a: 1", None)
                .unwrap_err()
                .0
                .contains("comments")
        );
        let (text, exprs) =
            placeholders("machine:\n  nodeLabels:\n    {{ key }}: x\n", None).unwrap();
        let mut doc = yaml::parse("t.yaml.j2", &text).unwrap().remove(0);
        assert!(
            set_aside(&mut doc, &exprs)
                .unwrap_err()
                .0
                .contains("in a key")
        );
    }

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_branches_taken_are_kept_and_every_line_keeps_its_number() {
        let text = "a: 1\n{% if ENV.T == 'cp' %}\nb: 2\n{% elif ENV.T == 'w' %}\nc: 3\n{% else %}\nd: 4\n{% endif %}\ne: {# gone #}5\n";
        let cp = render(text, &vars(&[("T", "cp")])).unwrap();
        assert_eq!(cp, "a: 1\n\nb: 2\n\n\n\n\n\ne: 5\n");
        let w = render(text, &vars(&[("T", "w")])).unwrap();
        assert_eq!(w.lines().nth(4), Some("c: 3"));
        let other = render(text, &vars(&[("T", "x")])).unwrap();
        assert_eq!(other.lines().nth(6), Some("d: 4"));
        assert_eq!(other.lines().count(), text.lines().count());
    }

    #[test]
    fn a_nested_branch_inside_one_not_taken_is_not_evaluated() {
        // `ENV.MISSING` would be an error, but its `if` sits in a branch not taken.
        let text = "{% if ENV.T == 'w' %}{% if ENV.MISSING %}x: 1{% endif %}{% endif %}y: 2";
        assert_eq!(render(text, &vars(&[("T", "cp")])).unwrap(), "y: 2");
    }

    #[test]
    fn what_gates_does_not_render_is_refused_with_its_line() {
        let v = vars(&[("T", "cp")]);
        let refused = |text: &str| render(text, &v).unwrap_err();
        assert!(
            refused("a: 1\n{% if ENV.OTHER == 'x' %}b{% endif %}")
                .0
                .starts_with("line 2: the condition `ENV.OTHER == 'x'` cannot be evaluated"),
            "{}",
            refused("a: 1\n{% if ENV.OTHER == 'x' %}b{% endif %}")
        );
        assert!(
            refused("{% for n in nodes %}x{% endfor %}")
                .0
                .contains("renders only if, elif and else")
        );
        assert!(
            refused("{% if ENV.T %}x")
                .0
                .contains("without its `{% endif %}`")
        );
        assert!(refused("{% endif %}").0.contains("without an `if`"));
        assert!(
            refused("a\n{% if ENV.T")
                .0
                .starts_with("line 2: an unclosed {%")
        );
    }

    #[test]
    fn a_known_variable_is_written_and_an_unknown_one_set_aside() {
        let known = vars(&[("T", "controlplane")]);
        let (text, exprs) = placeholders(
            "type: {{ ENV.T }}\nzone: {{ 'm' if ENV.T == 'controlplane' else 'w' }}\nimage: {{- ENV.IMAGE -}}\n",
            Some(&known),
        )
        .unwrap();
        assert!(
            text.starts_with("type: controlplane\nzone: m\nimage: __gates_unknown_0__"),
            "{text}"
        );
        assert_eq!(exprs, ["the Jinja interpolation `{{ ENV.IMAGE }}`"]);
    }

    /// Differential: minijinja's own full rendering (as minijinja-cli runs it, trim and lstrip
    /// blocks on) of the fixture's base template reads as the same YAML as gates's
    /// line-preserving one, for each role and for a role neither branch names.
    #[test]
    fn the_line_preserving_rendering_reads_as_minijinjas_own() {
        let path = concat!(
            concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
            "/fixtures/repo/talos-layouts/talos/rendered/machineconfig.yaml.j2"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let mut env = minijinja::Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        for role in ["controlplane", "worker", "other"] {
            let v = vars(&[("MACHINE_TYPE", role), ("SCHEMATIC", "abc")]);
            let theirs = env
                .render_str(&text, minijinja::context! { ENV => &v })
                .unwrap();
            let (ours, exprs) = placeholders(&render(&text, &v).unwrap(), Some(&v)).unwrap();
            assert!(exprs.is_empty());
            assert_eq!(ours.lines().count(), text.lines().count(), "{role}");
            let parse = |t: &str| gates_core::yaml::from_str::<serde_json::Value>(t).unwrap();
            assert_eq!(
                parse(&ours),
                parse(&theirs),
                "{role}:\n{ours}\n---\n{theirs}"
            );
        }
    }

    #[test]
    fn an_expression_minijinja_would_panic_on_is_an_error_naming_its_line() {
        // minijinja 2.24's lexer panics on `-}}x` inside an expression (found by fuzzing).
        let v = vars(&[("T", "cp")]);
        let err = render("a: 1\n{% if -}}x %}b{% endif %}", &v).unwrap_err();
        assert!(err.0.starts_with("line 2: the condition"), "{err}");
        assert!(evaluate("-}}x", &v).is_none());
    }
}
