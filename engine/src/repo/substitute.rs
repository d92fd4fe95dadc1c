//! Flux post-build variable substitution (`spec.postBuild`), as kustomize-controller applies
//! it to the objects of a Kustomization after the build: `${var}` takes the variable's value,
//! `${var:=default}` (and `:-`, `=`, `-`) a default, `$${var}` stays a literal `${var}`, and
//! `$var` is left alone. The variables are those of `substituteFrom` (ConfigMaps and Secrets,
//! later ones overriding earlier ones), then `substitute`, which takes precedence. Nothing is
//! substituted when neither defines a variable, nor in an object labelled or annotated
//! `kustomize.toolkit.fluxcd.io/substitute: disabled`. An undefined variable without a
//! default becomes empty, as with the controller's default (non-strict) feature gates.
//!
//! A variable whose value cannot be known (a source not in the repository, a SOPS-encrypted
//! Secret) makes only the objects that use it unknown: they are set aside as unread with
//! their kind, so only the trials that read that kind are affected.

use std::collections::BTreeMap;

use base64::Engine;

use super::site::RepoError;
use super::unread::{Kinds, Unread};
use super::yaml::{Node, Value};

gates_core::sentence_error! {
    /// Why a Flux `${...}` substitution cannot be made: a variable that is not known, or an
    /// expression gates does not evaluate.
    pub struct SubstitutionError;
}

const DISABLED: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// A variable's value, or why it is unknown.
#[derive(Debug, Clone)]
enum Var {
    Known(String),
    Unknown(String),
}

/// The variables of a Flux Kustomization's `postBuild`.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    vars: BTreeMap<String, Var>,
    /// Sources that may define any variable (not in the repository), with why.
    open: Vec<String>,
}

impl Vars {
    /// Read `postBuild` of `ks`; `sources` finds a ConfigMap or Secret by kind and name.
    /// `None`: nothing is substituted (no variable and no source).
    pub fn read<'a>(
        ks: &Node,
        namespace: &str,
        sources: impl Fn(&str, &str) -> Option<&'a Node>,
    ) -> Option<Vars> {
        let post = ks.get(&["spec", "postBuild"])?;
        let mut vars = Vars::default();
        let from = post
            .get(&["substituteFrom"])
            .and_then(Node::as_seq)
            .unwrap_or_default();
        for source in from {
            let kind = source.get_str(&["kind"]).unwrap_or_default();
            let name = source.get_str(&["name"]).unwrap_or_default();
            let optional = source
                .get(&["optional"])
                .and_then(Node::as_bool)
                .unwrap_or(false);
            match sources(kind, name) {
                Some(object) => vars.take(kind, namespace, name, object, &source.site),
                None => vars.open.push(format!(
                    "{}: postBuild.substituteFrom {kind} {namespace}/{name} is not in the repository{}",
                    source.site,
                    if optional { " (optional)" } else { "" }
                )),
            }
        }
        let inline = post
            .get(&["substitute"])
            .and_then(Node::as_map)
            .unwrap_or_default();
        for (key, value) in inline {
            let text = value
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.show());
            vars.vars.insert(key.clone(), Var::Known(text));
        }
        if vars.vars.is_empty() && vars.open.is_empty() && from.is_empty() {
            return None;
        }
        Some(vars)
    }

    fn take(
        &mut self,
        kind: &str,
        namespace: &str,
        name: &str,
        object: &Node,
        at: &super::site::Site,
    ) {
        let encrypted = object.get(&["sops"]).is_some();
        let mut put = |key: &str, value: Var| {
            self.vars.insert(key.to_string(), value);
        };
        for field in ["data", "stringData"] {
            for (key, value) in object
                .get(&[field])
                .and_then(Node::as_map)
                .unwrap_or_default()
            {
                let text = value.as_str().unwrap_or_default();
                let var = if encrypted {
                    Var::Unknown(format!(
                        "{at}: `{key}` of {kind} {namespace}/{name} is SOPS-encrypted"
                    ))
                } else if kind == "Secret" && field == "data" {
                    match base64::engine::general_purpose::STANDARD
                        .decode(text.trim())
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                    {
                        Some(plain) => Var::Known(plain),
                        None => Var::Unknown(format!(
                            "{}: `{key}` of Secret {namespace}/{name} is not base64 UTF-8",
                            value.site
                        )),
                    }
                } else {
                    Var::Known(text.to_string())
                };
                put(key, var);
            }
        }
    }

    /// Substitute every object not disabled; objects that use an unknown variable are
    /// returned as unread, with the kinds `kinds_of` says each may hold (a Flux
    /// Kustomization left unread holds what its path renders).
    pub fn apply(
        &self,
        objects: Vec<Node>,
        kinds_of: &dyn Fn(&Node) -> Kinds,
    ) -> (Vec<Node>, Vec<Unread>) {
        let mut kept = Vec::new();
        let mut unread = Vec::new();
        for mut object in objects {
            if disabled(&object) {
                kept.push(object);
                continue;
            }
            let mut unknown = Vec::new();
            substitute_node(&mut object, self, &mut unknown);
            if let Some(why) = unknown.first() {
                let kind = object.get_str(&["kind"]).unwrap_or("?").to_string();
                let name = object
                    .get_str(&["metadata", "name"])
                    .unwrap_or("?")
                    .to_string();
                unread.push(Unread {
                    error: RepoError::new(
                        object.site.clone(),
                        format!("{kind} {name}: Flux postBuild substitution: {why}"),
                    ),
                    kinds: kinds_of(&object),
                    object: Some(object),
                });
            } else {
                kept.push(object);
            }
        }
        (kept, unread)
    }

    fn lookup(&self, name: &str) -> Result<Option<&str>, SubstitutionError> {
        match self.vars.get(name) {
            Some(Var::Known(v)) => Ok(Some(v)),
            Some(Var::Unknown(why)) => {
                Err(SubstitutionError(format!("${{{name}}} is unknown: {why}")))
            }
            None => match self.open.first() {
                Some(why) => Err(SubstitutionError(format!(
                    "${{{name}}} may come from a source gates cannot read: {why}"
                ))),
                None => Ok(None),
            },
        }
    }
}

fn disabled(object: &Node) -> bool {
    ["labels", "annotations"]
        .iter()
        .any(|field| object.get_str(&["metadata", field, DISABLED]) == Some("disabled"))
}

fn substitute_node(node: &mut Node, vars: &Vars, unknown: &mut Vec<String>) {
    match &mut node.value {
        Value::Scalar(text, _) => {
            if text.contains('$') {
                match expand(text, vars) {
                    Ok(out) => *text = out,
                    Err(why) => unknown.push(why.0),
                }
            }
        }
        Value::Seq(items) => items
            .iter_mut()
            .for_each(|i| substitute_node(i, vars, unknown)),
        Value::Map(entries) => {
            for (_, value) in entries.iter_mut() {
                substitute_node(value, vars, unknown);
            }
        }
        Value::Null => {}
    }
}

/// Expand the `${...}` of one string.
pub(crate) fn expand(text: &str, vars: &Vars) -> Result<String, SubstitutionError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        let Some(body_start) = tail.strip_prefix("${") else {
            out.push('$');
            rest = &tail[1..];
            continue;
        };
        let Some(end) = body_start.find('}') else {
            return Err(SubstitutionError(format!("`{tail}` has no closing brace")));
        };
        out.push_str(&expression(&body_start[..end], vars)?);
        rest = &body_start[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// One `${...}` body: a name, optionally with a default.
fn expression(body: &str, vars: &Vars) -> Result<String, SubstitutionError> {
    let name_len = body
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_alphanumeric() || *c == '_') || (*i == 0 && c.is_ascii_digit()))
        .map_or(body.len(), |(i, _)| i);
    let (name, op) = body.split_at(name_len);
    if name.is_empty() {
        return Err(SubstitutionError(format!(
            "`${{{body}}}` is not a variable gates evaluates"
        )));
    }
    let value = vars.lookup(name)?;
    let default = [":=", ":-", "=", "-"]
        .iter()
        .find_map(|prefix| op.strip_prefix(prefix).map(|d| (*prefix, d)));
    match (op, default) {
        ("", _) => Ok(value.unwrap_or_default().to_string()),
        (_, Some((prefix, default))) => {
            let use_default = match value {
                None => true,
                Some(v) => prefix.starts_with(':') && v.is_empty(),
            };
            Ok(if use_default {
                default
            } else {
                value.unwrap_or_default()
            }
            .to_string())
        }
        _ => Err(SubstitutionError(format!(
            "`${{{body}}}` uses an operator gates does not evaluate (only defaults are)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::yaml;

    fn vars(inline: &[(&str, &str)]) -> Vars {
        let mut v = Vars::default();
        for (k, value) in inline {
            v.vars.insert(k.to_string(), Var::Known(value.to_string()));
        }
        v
    }

    #[test]
    fn variables_defaults_and_escapes_expand_as_flux_does() {
        let v = vars(&[("REPLICAS", "2"), ("EMPTY", "")]);
        assert_eq!(expand("${REPLICAS}", &v).unwrap(), "2");
        assert_eq!(expand("n-${MISSING:=3}", &v).unwrap(), "n-3");
        assert_eq!(expand("${EMPTY:=x}|${EMPTY=x}", &v).unwrap(), "x|");
        assert_eq!(
            expand("$${REPLICAS} $REPLICAS", &v).unwrap(),
            "${REPLICAS} $REPLICAS"
        );
        assert_eq!(expand("${MISSING}", &v).unwrap(), "", "non-strict: empty");
        assert!(expand("${REPLICAS^^}", &v).is_err());
    }

    fn doc(text: &str) -> Node {
        yaml::parse("app/x.yaml", text).unwrap().remove(0)
    }

    #[test]
    fn a_substituted_plain_scalar_reads_as_a_number_and_a_disabled_object_is_left_alone() {
        let v = vars(&[("REPLICAS", "2")]);
        let deploy = doc("kind: Deployment\nmetadata: {name: a}\nspec:\n  replicas: ${REPLICAS}\n");
        let off = doc(
            "kind: ConfigMap\nmetadata:\n  name: b\n  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}\ndata: {x: '${REPLICAS}'}\n",
        );
        let (kept, unread) = v.apply(vec![deploy, off], &|o| {
            Kinds::one(o.get_str(&["kind"]).unwrap_or("?"))
        });
        assert!(unread.is_empty());
        let replicas = kept[0].get(&["spec", "replicas"]).unwrap();
        assert_eq!((replicas.as_i64(), replicas.site.line), (Some(2), 4));
        assert_eq!(kept[1].get_str(&["data", "x"]), Some("${REPLICAS}"));
    }

    #[test]
    fn an_object_using_a_variable_from_an_encrypted_secret_is_unread_with_its_kind_only() {
        let ks = doc(
            "kind: Kustomization\nmetadata: {name: apps}\nspec:\n  postBuild:\n    substitute: {DOMAIN: example.org}\n    substituteFrom:\n      - {kind: Secret, name: cluster-secrets}\n",
        );
        let secret = doc(
            "kind: Secret\nmetadata: {name: cluster-secrets}\nstringData: {TOKEN: 'ENC[AES256_GCM,data:x]'}\nsops: {version: 3.9.0}\n",
        );
        let v = Vars::read(&ks, "flux-system", |kind, name| {
            (kind == "Secret" && name == "cluster-secrets").then_some(&secret)
        })
        .expect("variables are defined");
        let uses = doc("kind: Service\nmetadata: {name: s, annotations: {t: '${TOKEN}'}}\n");
        let plain = doc("kind: Deployment\nmetadata: {name: d, labels: {d: '${DOMAIN}'}}\n");
        let (kept, unread) = v.apply(vec![uses, plain], &|o| {
            Kinds::one(o.get_str(&["kind"]).unwrap_or("?"))
        });
        assert_eq!(kept.len(), 1);
        assert_eq!(
            kept[0].get_str(&["metadata", "labels", "d"]),
            Some("example.org")
        );
        assert_eq!(unread.len(), 1);
        assert_eq!(unread[0].kinds, Kinds::one("Service"));
        let text = unread[0].error.to_string();
        assert!(
            text.contains("${TOKEN} is unknown") && text.contains("SOPS-encrypted"),
            "{text}"
        );
    }

    #[test]
    fn a_postbuild_without_variables_or_sources_substitutes_nothing() {
        let ks = doc(
            "kind: Kustomization\nmetadata: {name: a}\nspec:\n  postBuild:\n    substitute: {}\n",
        );
        assert!(Vars::read(&ks, "flux-system", |_, _| None).is_none());
    }
}
