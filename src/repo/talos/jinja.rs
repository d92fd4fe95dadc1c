//! Jinja-templated Talos patches (`*.yaml.j2`, rendered by minijinja-cli or `just template`
//! before `talosctl` reads them). A template whose only Jinja is `{{ ... }}` interpolations is
//! read: every value an interpolation writes is *unknown* (set aside with its file, line and
//! expression) and everything else is read as written. Control flow (`{% ... %}`), comments
//! (`{# ... #}`) and an interpolation inside a key leave the whole template unread: what it
//! renders then depends on values gates does not have.

use crate::repo::site::Site;
use crate::repo::yaml::{Node, Value};

/// A value of a Talos patch that a template interpolation writes.
#[derive(Debug, Clone)]
pub struct Unknown {
    pub site: Site,
    /// The document's `kind`, or `v1alpha1` for the machine configuration itself.
    pub kind: String,
    /// The dotted path of the value in its document (`machine.install.image`).
    pub path: String,
    /// What writes it, as written (``the Jinja interpolation `{{ x }}` ``).
    pub exprs: Vec<String>,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} {} is written by {}, which gates does not evaluate",
            self.site,
            self.kind,
            self.path,
            self.exprs.join(", ")
        )
    }
}

const TOKEN: &str = "__gates_unknown_";

/// The placeholder for the `n`th value not known, plain text to YAML.
pub fn token(n: usize) -> String {
    format!("{TOKEN}{n}__")
}

/// The template's text with each interpolation replaced by a placeholder YAML reads as plain
/// text, and the interpolations in order; `Err`: why the template is not read.
pub fn placeholders(text: &str) -> Result<(String, Vec<String>), String> {
    if text.contains("{%") {
        return Err("a Jinja template with control flow ({% ... %}) gates does not render".into());
    }
    if text.contains("{#") {
        return Err("a Jinja template with comments ({# ... #}) gates does not render".into());
    }
    let mut out = String::with_capacity(text.len());
    let mut exprs = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            return Err("an unclosed {{ in the template".into());
        };
        out.push_str(&rest[..start]);
        out.push_str(&token(exprs.len()));
        exprs.push(format!(
            "the Jinja interpolation `{{{{ {} }}}}`",
            rest[start + 2..start + len].trim()
        ));
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    Ok((out, exprs))
}

/// Take the values the interpolations wrote out of a parsed document (`exprs`: what wrote
/// each placeholder, see [`token`]): a mapping entry holding one is removed, a list item holding one becomes null; each is returned as
/// [`Unknown`]. `Err`: an interpolation in a key, which makes the document's shape unknown.
pub fn set_aside(doc: &mut Node, exprs: &[String]) -> Result<Vec<Unknown>, String> {
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
) -> Result<(), String> {
    match &mut node.value {
        Value::Map(entries) => {
            let mut kept = Vec::with_capacity(entries.len());
            for (key, mut value) in std::mem::take(entries) {
                if key.contains(TOKEN) {
                    return Err(format!(
                        "{}: a Jinja interpolation in a key gates does not render",
                        value.site
                    ));
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
        let (text, exprs) = placeholders(text).unwrap();
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
            placeholders("{% if x %}a: 1{% endif %}")
                .unwrap_err()
                .contains("control flow")
        );
        assert!(
            placeholders("{# note #}a: 1")
                .unwrap_err()
                .contains("comments")
        );
        let (text, exprs) = placeholders("machine:\n  nodeLabels:\n    {{ key }}: x\n").unwrap();
        let mut doc = yaml::parse("t.yaml.j2", &text).unwrap().remove(0);
        assert!(
            set_aside(&mut doc, &exprs)
                .unwrap_err()
                .contains("in a key")
        );
    }
}
