//! Talos machine-config patches that Terraform applies through the siderolabs/talos provider:
//! the `config_patches` of `data "talos_machine_configuration"` and of
//! `resource "talos_machine_configuration_apply"`. They decide the same things as the patch
//! files of `talos/ENV` (scheduling on control planes, node labels, the VIP, taints), so they
//! are read into the same model, each value with the line that wrote it.
//!
//! A patch is read when it is `yamlencode(...)` of an HCL object (positions are the HCL
//! lines, or the tfvars line of a `var.*`/`each.*` value), `file(...)` of a repository file,
//! `templatefile(...)` whose `${name}` placeholders all have literal values, or a heredoc
//! without interpolations. Which nodes it applies to comes from the block: one instance per
//! `for_each` key (the node of that name), or, without `for_each`, a literal `machine_type`
//! (`controlplane` or `worker`). Anything else is skipped with the reason, naming the file and
//! line; never guessed.

use std::path::Path;

use hcl_edit::Span;
use hcl_edit::expr::Expression;
use hcl_edit::structure::Block;
use hcl_edit::template::{Element, Template};

use super::hcl_eval::EvalError;
use super::{File, Scope, TfPatch, eval, label, source};
use crate::repo::kustomize::{read, resolve};
use crate::repo::site::{RepoError, Site};
use crate::repo::talos::Applies;
use crate::repo::talos::jinja::{self, Unknown};
use crate::repo::yaml::{self, Node, Value};

/// The blocks whose `config_patches` reach a machine configuration, in the order the
/// provider applies them (the generated configuration first, then the apply's own).
pub(super) const DATA: &str = "talos_machine_configuration";
pub(super) const APPLY: &str = "talos_machine_configuration_apply";

/// What one module's blocks give: patches read, patches skipped with the reason, and the
/// first patch that is malformed (a file that is missing, or not YAML, or not a mapping).
#[derive(Debug, Default)]
pub(super) struct Found {
    pub patches: Vec<TfPatch>,
    pub skipped: Vec<String>,
    pub malformed: Option<RepoError>,
    /// Values of the patches read that a template writes from a variable gates cannot
    /// evaluate (a credential, a value only known after apply).
    pub unknown: Vec<Unknown>,
}

/// Why a patch is not read: gates does not evaluate it (skipped), or it is broken (an error).
enum Unread {
    Skip(String),
    Bad(RepoError),
}

impl From<String> for Unread {
    fn from(why: String) -> Unread {
        Unread::Skip(why)
    }
}

impl From<EvalError> for Unread {
    fn from(why: EvalError) -> Self {
        Unread::from(why.0)
    }
}

impl From<RepoError> for Unread {
    fn from(err: RepoError) -> Unread {
        Unread::Bad(err)
    }
}

/// Where `file()` paths are resolved: `path.module` and `path.root` (and a relative path,
/// which Terraform takes from the working directory, the root module).
pub(super) struct Paths<'a> {
    pub repo: &'a Path,
    pub module: &'a str,
    pub root: &'a str,
}

/// Read the `config_patches` of one talos provider block.
pub(super) fn collect(
    block: &Block,
    file: &File,
    scope: &Scope,
    paths: &Paths<'_>,
    out: &mut Found,
) {
    let Some(attr) = block.body.get_attribute("config_patches") else {
        return;
    };
    let resource = format!("{}.{}", label(block, 0), label(block, 1));
    let at = file.site(attr.value.span());
    let Some(instances) = targets(block, file, scope, &at, &resource, &mut out.skipped) else {
        return;
    };
    for (applies, scope) in instances {
        let items = match elements(&attr.value, file, &scope) {
            Ok(items) => items,
            Err(why) => {
                let line = format!("{at}: {resource} config_patches not read: {why}");
                if !out.skipped.contains(&line) {
                    out.skipped.push(line);
                }
                continue;
            }
        };
        for item in items {
            match patch(item, file, &scope, paths, &mut out.unknown) {
                Ok(docs) => out
                    .patches
                    .extend(docs.into_iter().map(|(file, doc)| TfPatch {
                        file,
                        applies: applies.clone(),
                        doc,
                    })),
                Err(Unread::Skip(why)) => {
                    let line = format!("{resource} patch not read: {why}");
                    if !out.skipped.contains(&line) {
                        out.skipped.push(line);
                    }
                }
                Err(Unread::Bad(err)) => {
                    out.malformed.get_or_insert(err);
                }
            }
        }
    }
}

/// Which machines each instance of the resource configures: the nodes its `for_each` names,
/// or the role its literal `machine_type` names; `None` when that is not declared (said in
/// `skipped`).
fn targets(
    block: &Block,
    file: &File,
    scope: &Scope,
    at: &Site,
    resource: &str,
    skipped: &mut Vec<String>,
) -> Option<Vec<(Applies, Scope)>> {
    let instances: Vec<(Applies, Scope)> = if let Some(each) = block.body.get_attribute("for_each")
    {
        match eval(&each.value, file, scope) {
            Ok(items) => match &items.value {
                Value::Map(entries) => entries
                    .iter()
                    .map(|(k, v)| {
                        let scope = Scope {
                            each: Some((Node::str(k, v.site.clone()), v.clone())),
                            ..scope.clone()
                        };
                        (Applies::Node(k.clone()), scope)
                    })
                    .collect(),
                Value::Seq(items) => items
                    .iter()
                    .filter_map(|v| {
                        let name = v.as_str()?.to_string();
                        let scope = Scope {
                            each: Some((v.clone(), v.clone())),
                            ..scope.clone()
                        };
                        Some((Applies::Node(name), scope))
                    })
                    .collect(),
                Value::Null | Value::Scalar(..) => {
                    skipped.push(format!(
                        "{at}: {resource} config_patches not read: for_each is not a map or a set"
                    ));
                    return None;
                }
            },
            Err(err) => {
                skipped.push(format!(
                    "{at}: {resource} config_patches not read: its for_each cannot be evaluated ({err})"
                ));
                return None;
            }
        }
    } else if block.body.get_attribute("count").is_some() {
        skipped.push(format!(
            "{at}: {resource} config_patches not read: with `count`, which node each instance configures is not declared by name (use for_each over the nodes)"
        ));
        return None;
    } else {
        let role = block
            .body
            .get_attribute("machine_type")
            .and_then(|a| eval(&a.value, file, scope).ok())
            .and_then(|n| n.as_str().map(str::to_string));
        match role.as_deref() {
            Some("controlplane") => vec![(Applies::ControlPlanes, scope.clone())],
            Some("worker") => vec![(Applies::Workers, scope.clone())],
            _ => {
                skipped.push(format!(
                    "{at}: {resource} config_patches not read: which nodes they apply to is not declared (no for_each over the nodes and no literal machine_type)"
                ));
                return None;
            }
        }
    };
    Some(instances)
}

/// The elements of a `config_patches` list for one instance: a list written in place, a
/// conditional whose condition gates evaluates (the branch Terraform takes), or `concat` of
/// such lists. Anything else is not read.
fn elements<'e>(
    expr: &'e Expression,
    file: &File,
    scope: &Scope,
) -> Result<Vec<&'e Expression>, EvalError> {
    match expr {
        Expression::Array(items) => Ok(items.iter().collect()),
        Expression::Parenthesis(inner) => elements(inner.inner(), file, scope),
        Expression::Conditional(c) => {
            let cond = eval(&c.cond_expr, file, scope).map_err(|e| {
                format!(
                    "the condition `{}` cannot be evaluated: {e}",
                    source(&c.cond_expr, file)
                )
            })?;
            match cond.as_bool() {
                Some(true) => elements(&c.true_expr, file, scope),
                Some(false) => elements(&c.false_expr, file, scope),
                None => Err(EvalError(format!(
                    "the condition `{}` is not a bool",
                    source(&c.cond_expr, file)
                ))),
            }
        }
        Expression::FuncCall(call) if call.name.name.as_str() == "concat" => {
            let mut out = Vec::new();
            for arg in call.args.iter() {
                out.extend(elements(arg, file, scope)?);
            }
            Ok(out)
        }
        _ => Err(EvalError(format!(
            "`{}` is not a list written in place",
            source(expr, file)
        ))),
    }
}

/// The documents of one `config_patches` element, each with the file it was written in.
fn patch(
    expr: &Expression,
    file: &File,
    scope: &Scope,
    paths: &Paths<'_>,
    unknown: &mut Vec<Unknown>,
) -> Result<Vec<(String, Node)>, Unread> {
    let at = file.site(expr.span());
    let mapping = |doc: Node| -> Result<Node, Unread> {
        match doc.value {
            Value::Map(_) => Ok(doc),
            _ => Err(Unread::Bad(RepoError::new(
                doc.site,
                "a machine-config patch must be a YAML mapping",
            ))),
        }
    };
    match expr {
        Expression::FuncCall(call) => {
            let name = call.name.name.as_str();
            let args: Vec<&Expression> = call.args.iter().collect();
            match (name, args.as_slice()) {
                ("yamlencode", [object]) => {
                    let doc = eval(object, file, scope).map_err(|e| e.to_string())?;
                    Ok(vec![(file.name.clone(), mapping(doc)?)])
                }
                ("file", [path]) => {
                    let rel = file_path(path, file, paths)?;
                    let text = read(paths.repo, &rel)?;
                    yaml_docs(&rel, &text, 0, mapping)
                }
                ("templatefile", [path, vars]) => {
                    let rel = file_path(path, file, paths)?;
                    let text = read(paths.repo, &rel)?;
                    let (vars, not_known) = partial_vars(vars, file, scope).map_err(|e| {
                        format!("{rel} is rendered with variables gates cannot evaluate: {e}")
                    })?;
                    if not_known.is_empty() {
                        let text = render_template(&rel, &text, &vars)?;
                        return yaml_docs(&rel, &text, 0, mapping);
                    }
                    // Variables gates cannot evaluate (a credential, say): the values they
                    // write are set aside, the rest of the patch is read.
                    let names: Vec<String> = not_known.iter().map(|(n, _)| n.clone()).collect();
                    let (text, exprs) =
                        super::hcl_eval::render_template_partly(&rel, &text, &vars, &names)?;
                    let mut docs = yaml::parse(&rel, &text)?;
                    for doc in &mut docs {
                        for found in
                            jinja::set_aside(doc, &exprs).map_err(|why| Unread::Skip(why.0))?
                        {
                            // One line per value, however many nodes the patch applies to.
                            if !unknown.iter().any(|u| u.to_string() == found.to_string()) {
                                unknown.push(found);
                            }
                        }
                    }
                    docs.into_iter()
                        .map(|doc| mapping(doc).map(|d| (rel.clone(), d)))
                        .collect()
                }
                _ => Err(Unread::Skip(format!(
                    "{at}: `{}` is not evaluated by gates (yamlencode of an object, file(), templatefile() and heredocs are)",
                    source(expr, file)
                ))),
            }
        }
        Expression::HeredocTemplate(heredoc) => {
            let text = literal(&heredoc.template).ok_or_else(|| {
                Unread::Skip(format!(
                    "{at}: a heredoc with interpolations is not evaluated by gates; use yamlencode() or templatefile()"
                ))
            })?;
            yaml_docs(&file.name, &text, at.line, mapping)
        }
        _ => Err(Unread::Skip(format!(
            "{at}: `{}` is not evaluated by gates (yamlencode of an object, file(), templatefile() and heredocs are)",
            source(expr, file)
        ))),
    }
}

/// The variables of a `templatefile` call, each evaluated on its own: those gates can
/// evaluate as a map, and the names of the others with why. An object written in place and
/// `merge` of such objects (later keys winning) are read key by key; any other expression is
/// evaluated whole, and when it cannot be, which names it holds is not known (`Err`).
fn partial_vars(
    expr: &Expression,
    file: &File,
    scope: &Scope,
) -> Result<(Node, Vec<(String, String)>), EvalError> {
    use hcl_edit::expr::ObjectKey;
    let site = file.site(expr.span());
    let mut known: Vec<(String, Node)> = Vec::new();
    let mut unknown: Vec<(String, String)> = Vec::new();
    let put = |key: String,
               value: Result<Node, EvalError>,
               known: &mut Vec<(String, Node)>,
               unknown: &mut Vec<(String, String)>| {
        known.retain(|(k, _)| *k != key);
        unknown.retain(|(k, _)| *k != key);
        match value {
            Ok(v) => known.push((key, v)),
            Err(why) => unknown.push((key, why.0)),
        }
    };
    match expr {
        Expression::Object(object) => {
            for (key, value) in object.iter() {
                let key = match key {
                    ObjectKey::Ident(ident) => ident.as_str().to_string(),
                    ObjectKey::Expression(e) => {
                        e.as_str().map(str::to_string).ok_or_else(|| {
                            EvalError(format!("`{}` is not a literal key", source(e, file)))
                        })?
                    }
                };
                let value = eval(value.expr(), file, scope).map_err(|e| EvalError(e.to_string()));
                put(key, value, &mut known, &mut unknown);
            }
        }
        Expression::FuncCall(call) if call.name.name.as_str() == "merge" => {
            for arg in call.args.iter() {
                let (part, missing) = partial_vars(arg, file, scope)?;
                for (key, value) in part.as_map().unwrap_or_default() {
                    put(key.clone(), Ok(value.clone()), &mut known, &mut unknown);
                }
                for (key, why) in missing {
                    put(key, Err(EvalError(why)), &mut known, &mut unknown);
                }
            }
        }
        _ => {
            let value = eval(expr, file, scope).map_err(|e| e.to_string())?;
            match &value.value {
                Value::Map(entries) => known.extend(entries.iter().cloned()),
                Value::Null => {}
                Value::Scalar(..) | Value::Seq(_) => {
                    return Err(EvalError(format!(
                        "`{}` is not an object",
                        source(expr, file)
                    )));
                }
            }
        }
    }
    Ok((Node::new(Value::Map(known), site), unknown))
}

fn yaml_docs(
    rel: &str,
    text: &str,
    shift: usize,
    mapping: impl Fn(Node) -> Result<Node, Unread>,
) -> Result<Vec<(String, Node)>, Unread> {
    yaml::parse_shifted(rel, text, shift)?
        .into_iter()
        .map(|doc| mapping(doc).map(|d| (rel.to_string(), d)))
        .collect()
}

/// The text of a template made of literals only.
fn literal(template: &Template) -> Option<String> {
    template
        .iter()
        .map(|e| e.as_literal().map(|l| l.as_str().to_string()))
        .collect()
}

/// A `file()` path: a literal, or `${path.module}`/`${path.root}` followed by a literal.
fn file_path(expr: &Expression, file: &File, paths: &Paths<'_>) -> Result<String, EvalError> {
    let at = file.site(expr.span());
    let unknown = || {
        format!(
            "{at}: the path `{}` is not evaluated by gates (a literal, or ${{path.module}}/${{path.root}} and a literal, is)",
            source(expr, file)
        )
    };
    let (base, rest) = match expr {
        Expression::String(s) => (paths.root, s.value().to_string()),
        Expression::StringTemplate(template) => {
            let elements: Vec<&Element> = template.iter().collect();
            let [Element::Interpolation(first), rest @ ..] = elements.as_slice() else {
                return Err(unknown().into());
            };
            let base = match path_ref(&first.expr) {
                Some("module") => paths.module,
                Some("root") => paths.root,
                _ => return Err(unknown().into()),
            };
            let rest: Option<String> = rest
                .iter()
                .map(|e| e.as_literal().map(|l| l.as_str().to_string()))
                .collect();
            (base, rest.ok_or_else(unknown)?)
        }
        _ => return Err(unknown().into()),
    };
    resolve(base, rest.trim_start_matches('/'), &at).map_err(|e| EvalError(e.to_string()))
}

/// `module` for `path.module`, `root` for `path.root`.
fn path_ref(expr: &Expression) -> Option<&str> {
    let Expression::Traversal(traversal) = expr else {
        return None;
    };
    let Expression::Variable(root) = &traversal.expr else {
        return None;
    };
    match (root.as_str(), traversal.operators.as_slice()) {
        ("path", [op]) => match op.value() {
            hcl_edit::expr::TraversalOperator::GetAttr(name) => Some(name.as_str()),
            _ => None,
        },
        _ => None,
    }
}

/// A `templatefile` rendered as Terraform renders it (see [`super::hcl_eval::render_template`]);
/// what cannot be rendered is the reason not to read the patch.
fn render_template(rel: &str, text: &str, vars: &Node) -> Result<String, EvalError> {
    super::hcl_eval::render_template(rel, text, vars)
}

#[cfg(test)]
mod tests;
