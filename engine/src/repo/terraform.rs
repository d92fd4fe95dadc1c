//! Terraform as declared: the Proxmox VMs of an environment (bpg/proxmox
//! `proxmox_virtual_environment_vm` and Telmate `proxmox_vm_qemu`) with their host, cores,
//! memory and tags; the variables and their defaults; the environment's `tfvars`; and the
//! talosconfig endpoints of `talos_client_configuration` where declared. Parsed with
//! hcl-edit, whose byte spans give every value its file and line.
//!
//! Only what can be known without running Terraform is evaluated: literals, `var.*`,
//! `each.key`, `each.value.*` and `count.index`, across local modules. Functions,
//! conditionals, `local.*` and other references in an attribute the trials read are errors
//! naming the file and line; a module from a registry or Git is recorded as unread.

use std::collections::BTreeMap;
use std::path::Path;

use hcl_edit::Span;
use hcl_edit::expr::{Expression, ObjectKey, Traversal, TraversalOperator};
use hcl_edit::structure::{Block, Body, Structure};

use super::kustomize::{join, read, resolve};
use super::site::{RepoError, Site};
use super::yaml::{Node, Value};

mod hcl_eval;
mod roles;
mod talos_patches;

// What Terraform declares is pure: it lives in core.
pub use gates_core::declared::terraform::{
    BPG_VM, HostUnknown, TELMATE_VM, Terraform, TfPatch, Variable, Vm,
};

struct File {
    name: String,
    text: String,
    body: Body,
}

impl File {
    fn site(&self, span: Option<std::ops::Range<usize>>) -> Site {
        let offset = span.map(|s| s.start).unwrap_or(0).min(self.text.len());
        Site::new(&self.name, self.text[..offset].matches('\n').count() + 1)
    }
}

/// Parse every `.tf` file of a directory.
fn parse_dir(repo: &Path, dir: &str) -> Result<Vec<File>, RepoError> {
    let mut names: Vec<String> = std::fs::read_dir(repo.join(dir))
        .map_err(|err| RepoError::file(dir, format!("cannot read the Terraform directory: {err}")))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tf"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| parse_file(repo, &join(dir, n)))
        .collect()
}

fn parse_file(repo: &Path, rel: &str) -> Result<File, RepoError> {
    let text = read(repo, rel)?;
    parse_text(rel, text)
}

fn parse_text(rel: &str, text: String) -> Result<File, RepoError> {
    let body = hcl_edit::parser::parse_body(&text).map_err(|err| {
        RepoError::new(
            Site::new(rel, err.location().line()),
            format!("malformed HCL: {}", err.message()),
        )
    })?;
    Ok(File {
        name: rel.to_string(),
        text,
        body,
    })
}

/// What an expression may refer to.
#[derive(Default, Clone)]
struct Scope {
    vars: BTreeMap<String, Result<Node, RepoError>>,
    /// The module's locals that could be evaluated, and why the others could not.
    locals: Vec<(String, hcl::Value)>,
    local_errors: BTreeMap<String, RepoError>,
    /// Variables declared without a default and not given a value.
    unset: Vec<String>,
    each: Option<(Node, Node)>,
    index: Option<Node>,
    files: Option<hcl_eval::Files>,
    /// The module instance's qualified name (`""` for the root module).
    module: String,
}

impl Scope {
    /// `module.NAME.` for a child module, nothing for the root: what makes one module's
    /// `var.x` another's.
    fn module_prefix(&self) -> String {
        if self.module.is_empty() {
            String::new()
        } else {
            format!("module.{}.", self.module)
        }
    }

    fn names(&self) -> hcl_eval::Names {
        hcl_eval::Names {
            var: self
                .vars
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), hcl_eval::to_hcl(v.as_ref().ok()?))))
                .collect(),
            local: self.locals.clone(),
            each: self
                .each
                .as_ref()
                .map(|(k, v)| (hcl_eval::to_hcl(k), hcl_eval::to_hcl(v))),
            count: self.index.as_ref().map(hcl_eval::to_hcl),
            files: self.files.clone(),
        }
    }

    /// Evaluate the `locals` blocks of a module, each local once the ones it uses are known.
    fn with_locals(mut self, files: &[File]) -> Scope {
        let mut pending: Vec<(&File, &hcl_edit::structure::Attribute)> = files
            .iter()
            .flat_map(|f| {
                blocks(&f.body, "locals")
                    .flat_map(move |b| b.body.attributes().map(move |a| (f, a)))
            })
            .collect();
        loop {
            let before = pending.len();
            let mut rest = Vec::new();
            for (file, attr) in pending {
                let key = attr.key.as_str().to_string();
                match eval(&attr.value, file, &self) {
                    Ok(value) => {
                        self.local_errors.remove(&key);
                        self.locals.push((key, hcl_eval::to_hcl(&value)));
                    }
                    Err(err) => {
                        self.local_errors.insert(key, err);
                        rest.push((file, attr));
                    }
                }
            }
            pending = rest;
            if pending.is_empty() || pending.len() == before {
                break;
            }
        }
        self
    }
}

/// Read the Terraform of `dir`, with the environment's tfvars file when there is one.
pub fn load(repo: &Path, dir: &str, tfvars: Option<&str>) -> Result<Terraform, RepoError> {
    let files = parse_dir(repo, dir)?;
    let mut given = BTreeMap::new();
    // Terraform reads terraform.tfvars, then *.auto.tfvars in lexical order, then the files
    // given on the command line (here, the environment's), each overriding the ones before.
    let mut files_in_order: Vec<String> = auto_tfvars(repo, dir);
    if let Some(given) = tfvars.filter(|t| !files_in_order.iter().any(|f| f == t)) {
        files_in_order.push(given.to_string());
    }
    for tfvars in &files_in_order {
        let file = parse_file(repo, tfvars)?;
        for structure in file.body.iter() {
            match structure {
                Structure::Attribute(attr) => {
                    let value = eval(&attr.value, &file, &Scope::default())?;
                    given.insert(attr.key.as_str().to_string(), Ok(value));
                }
                Structure::Block(block) => {
                    return Err(RepoError::new(
                        file.site(block.span()),
                        "a tfvars file holds only `name = value` lines",
                    ));
                }
            }
        }
    }
    let mut out = Terraform {
        dir: dir.to_string(),
        ..Terraform::default()
    };
    module(repo, dir, "", &files, given, &mut out, 0)?;
    let applied = std::mem::take(&mut out.applied);
    roles::assign(&mut out, &applied);
    out.applied = applied;
    Ok(out)
}

/// The root module's `terraform.tfvars` and `*.auto.tfvars`, in the order Terraform reads them.
fn auto_tfvars(repo: &Path, dir: &str) -> Vec<String> {
    let mut auto: Vec<String> = std::fs::read_dir(repo.join(dir))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".auto.tfvars"))
                .collect()
        })
        .unwrap_or_default();
    auto.sort();
    let mut out = Vec::new();
    if repo.join(dir).join("terraform.tfvars").is_file() {
        out.push(join(dir, "terraform.tfvars"));
    }
    out.extend(auto.iter().map(|n| join(dir, n)));
    out
}

fn module(
    repo: &Path,
    dir: &str,
    name: &str,
    files: &[File],
    given: BTreeMap<String, Result<Node, RepoError>>,
    out: &mut Terraform,
    depth: usize,
) -> Result<(), RepoError> {
    if depth > 16 {
        return Err(RepoError::file(dir, "modules nest more than 16 deep"));
    }
    let mut scope = Scope {
        files: Some(hcl_eval::Files {
            repo: repo.to_path_buf(),
            module: dir.to_string(),
            root: out.dir.clone(),
        }),
        module: name.to_string(),
        ..Scope::default()
    };
    variables(files, name, &given, &mut scope, out)?;
    let scope = scope.with_locals(files);
    let types = roles::machine_types(files, &scope);
    let here = Here {
        repo,
        dir,
        name,
        depth,
    };
    for file in files {
        for block in blocks(&file.body, "module") {
            here.call(block, file, &scope, out)?;
        }
        for block in blocks(&file.body, "resource") {
            let kind = label(block, 0);
            if kind == BPG_VM || kind == TELMATE_VM {
                vms(block, file, &scope, out)?;
            }
        }
        for block in blocks(&file.body, "resource").filter(|b| label(b, 0) == talos_patches::APPLY)
        {
            roles::applied(block, file, &scope, &types, &mut out.applied);
        }
        for block in blocks(&file.body, "data") {
            if label(block, 0) == "talos_client_configuration"
                && let Some(attr) = block.body.get_attribute("endpoints")
            {
                out.talos_endpoints = Some(eval(&attr.value, file, &scope));
            }
        }
    }
    machine_config(repo, dir, files, &scope, out);
    Ok(())
}

/// The module's variables: each one's value in `scope` (what the caller gave, else its
/// default) or unset, and each recorded with its default and what it was given.
fn variables(
    files: &[File],
    name: &str,
    given: &BTreeMap<String, Result<Node, RepoError>>,
    scope: &mut Scope,
    out: &mut Terraform,
) -> Result<(), RepoError> {
    for file in files {
        for block in blocks(&file.body, "variable") {
            let var = label(block, 0);
            let default = match block.body.get_attribute("default") {
                Some(attr) => Some(eval(&attr.value, file, &Scope::default())?),
                None => None,
            };
            let typed = block.body.get_attribute("type").map(|t| &t.value);
            let value = given.get(&var).cloned().or_else(|| default.clone().map(Ok));
            let value = value.map(|v| v.map(|v| with_optional(v, typed, file)));
            match value {
                Some(value) => {
                    scope.vars.insert(var.clone(), value);
                }
                None => scope.unset.push(var.clone()),
            }
            if let Some(Ok(value)) = given.get(&var) {
                let qualified = if name.is_empty() {
                    format!("var.{var}")
                } else {
                    format!("module.{name}.var.{var}")
                };
                out.module_inputs.insert(qualified, value.clone());
            }
            out.variables.push(Variable {
                module: name.to_string(),
                name: var,
                site: file.site(block.span()),
                default,
            });
        }
    }
    Ok(())
}

/// The module being read: where it is, its qualified name and how deep it nests.
struct Here<'h> {
    repo: &'h Path,
    dir: &'h str,
    name: &'h str,
    depth: usize,
}

impl Here<'_> {
    /// A `module` block: each instance read with the inputs it gives; a module from outside
    /// the repository is set aside.
    fn call(
        &self,
        block: &Block,
        file: &File,
        scope: &Scope,
        out: &mut Terraform,
    ) -> Result<(), RepoError> {
        let call = label(block, 0);
        let source_attr = block.body.get_attribute("source");
        let source = source_attr
            .and_then(|a| a.value.as_str())
            .unwrap_or_default();
        let site = file.site(block.span());
        if !(source.starts_with("./") || source.starts_with("../")) {
            out.unread_modules.push(format!(
                "{site}: module {call} comes from `{source}`, which is not in the repository"
            ));
            return Ok(());
        }
        let child_dir = resolve(self.dir, source, &site)?;
        let child_files = parse_dir(self.repo, &child_dir)?;
        for (key, scope) in instances(block, file, scope, &format!("module {call}"))? {
            let mut inputs = BTreeMap::new();
            for attr in block.body.attributes() {
                let key = attr.key.as_str();
                if [
                    "source",
                    "version",
                    "providers",
                    "depends_on",
                    "count",
                    "for_each",
                ]
                .contains(&key)
                {
                    continue;
                }
                // An input gates cannot evaluate is an error where the module uses it,
                // never the module's default in its place.
                inputs.insert(key.to_string(), eval(&attr.value, file, &scope));
            }
            let call = match key {
                Some(key) => format!("{call}[{key}]"),
                None => call.clone(),
            };
            module(
                self.repo,
                &child_dir,
                &qualify(self.name, &call),
                &child_files,
                inputs,
                out,
                self.depth + 1,
            )?;
        }
        Ok(())
    }
}

/// The Talos machine configuration the module declares: the configuration's patches first,
/// then what the apply adds to them.
fn machine_config(repo: &Path, dir: &str, files: &[File], scope: &Scope, out: &mut Terraform) {
    let root = out.dir.clone();
    let paths = talos_patches::Paths {
        repo,
        module: dir,
        root: &root,
    };
    let mut found = talos_patches::Found::default();
    for (kind, name) in [
        ("data", talos_patches::DATA),
        ("resource", talos_patches::APPLY),
    ] {
        for file in files {
            for block in blocks(&file.body, kind).filter(|b| label(b, 0) == name) {
                talos_patches::collect(block, file, scope, &paths, &mut found);
            }
        }
    }
    out.talos_patches.extend(found.patches);
    out.talos_skipped.extend(found.skipped);
    out.talos_unknown.extend(found.unknown);
    if out.talos_malformed.is_none() {
        out.talos_malformed = found.malformed;
    }
}

fn qualify(parent: &str, call: &str) -> String {
    if parent.is_empty() {
        call.to_string()
    } else {
        format!("{parent}.{call}")
    }
}

fn blocks<'a>(body: &'a Body, ident: &'a str) -> impl Iterator<Item = &'a Block> + 'a {
    body.blocks().filter(move |b| b.ident.as_str() == ident)
}

fn label(block: &Block, index: usize) -> String {
    block
        .labels
        .get(index)
        .map(|l| l.as_str().to_string())
        .unwrap_or_default()
}

/// The instances of a resource or module block: one per `for_each` element (with its key)
/// or `count` index, or the block itself.
fn instances(
    block: &Block,
    file: &File,
    scope: &Scope,
    what: &str,
) -> Result<Vec<(Option<String>, Scope)>, RepoError> {
    if let Some(attr) = block.body.get_attribute("for_each") {
        let items = eval(&attr.value, file, scope)?;
        return match &items.value {
            Value::Map(entries) => Ok(entries
                .iter()
                .map(|(k, v)| {
                    let each = Some((Node::str(k, v.site.clone()), v.clone()));
                    (
                        Some(k.clone()),
                        Scope {
                            each,
                            ..scope.clone()
                        },
                    )
                })
                .collect()),
            Value::Seq(items) => Ok(items
                .iter()
                .map(|v| {
                    let key = v.as_str().map(str::to_string);
                    (
                        key,
                        Scope {
                            each: Some((v.clone(), v.clone())),
                            ..scope.clone()
                        },
                    )
                })
                .collect()),
            Value::Null | Value::Scalar(..) => Err(RepoError::new(
                file.site(attr.value.span()),
                format!("{what}: for_each is not a map or a set"),
            )),
        };
    }
    if let Some(attr) = block.body.get_attribute("count") {
        let count = eval(&attr.value, file, scope)?;
        let n = count.as_i64().filter(|n| *n >= 0).ok_or_else(|| {
            RepoError::new(
                file.site(attr.value.span()),
                format!("{what}: count is not a number"),
            )
        })?;
        return Ok((0..n)
            .map(|i| {
                let index = Some(Node::new(
                    Value::Scalar(i.to_string(), true),
                    count.site.clone(),
                ));
                (
                    Some(i.to_string()),
                    Scope {
                        index,
                        ..scope.clone()
                    },
                )
            })
            .collect());
    }
    Ok(vec![(None, scope.clone())])
}

/// One instance of a VM resource's attributes, evaluated in its scope.
struct Attrs<'a> {
    block: &'a Block,
    file: &'a File,
    scope: &'a Scope,
}

impl Attrs<'_> {
    /// The attribute at `path` (nested blocks, then the attribute), evaluated; `None` when
    /// the resource does not set it.
    fn get(&self, path: &[&str]) -> Result<Option<Node>, RepoError> {
        let mut body = &self.block.body;
        for inner in &path[..path.len() - 1] {
            match body.blocks().find(|b| b.ident.as_str() == *inner) {
                Some(b) => body = &b.body,
                None => return Ok(None),
            }
        }
        match body.get_attribute(path[path.len() - 1]) {
            Some(a) => eval(&a.value, self.file, self.scope).map(Some),
            None => Ok(None),
        }
    }

    /// The static IPv4 addresses the VM is given (Telmate's `ipconfigN`, bpg's
    /// `initialization.ip_config`), without their prefix lengths; DHCP gives none.
    fn addresses(&self, telmate: bool) -> Vec<String> {
        let attr = |path: &[&str]| self.get(path);
        if telmate {
            (0..16)
                .filter_map(|i| attr(&[format!("ipconfig{i}").as_str()]).ok().flatten())
                .filter_map(|n| {
                    n.as_str()?
                        .split(',')
                        .find_map(|part| part.trim().strip_prefix("ip="))
                        .map(|ip| ip.split('/').next().unwrap_or(ip).to_string())
                })
                .filter(|ip| ip != "dhcp")
                .collect()
        } else {
            attr(&["initialization", "ip_config", "ipv4", "address"])
                .ok()
                .flatten()
                .and_then(|n| {
                    n.as_str()
                        .map(|a| a.split('/').next().unwrap_or(a).to_string())
                })
                .filter(|ip| ip != "dhcp")
                .into_iter()
                .collect()
        }
    }

    /// The VM's tags: a list (bpg) or one `;`- or `,`-separated string (Telmate).
    fn tags(&self) -> Result<Vec<Node>, RepoError> {
        Ok(match self.get(&["tags"])? {
            Some(node) => match &node.value {
                Value::Seq(items) => items.clone(),
                // Telmate takes one string, `;`- or `,`-separated.
                Value::Scalar(text, _) => text
                    .split([';', ','])
                    .filter(|t| !t.trim().is_empty())
                    .map(|t| Node::str(t.trim(), node.site.clone()))
                    .collect(),
                Value::Null | Value::Map(_) => Vec::new(),
            },
            None => Vec::new(),
        })
    }
}

/// Expand one VM resource over its `for_each` or `count`.
fn vms(block: &Block, file: &File, scope: &Scope, out: &mut Terraform) -> Result<(), RepoError> {
    let resource = format!("{}.{}", label(block, 0), label(block, 1));
    let instances = instances(block, file, scope, &resource)?;
    let telmate = label(block, 0) == TELMATE_VM;
    for (key, instance) in instances {
        let attrs = Attrs {
            block,
            file,
            scope: &instance,
        };
        let attr = |path: &[&str]| attrs.get(path);
        // A name gates cannot evaluate is unknown, not the end of the read: the trials that
        // match nodes by name say so, the others reach their verdicts.
        let address = match &key {
            Some(key) => format!("{resource}[\"{key}\"]"),
            None => resource.clone(),
        };
        let (name, name_unknown) = match attr(&["name"]) {
            Ok(Some(name)) => (name, None),
            Ok(None) => (Node::str(&resource, file.site(block.span())), None),
            Err(err) => (
                Node::str(key.as_deref().unwrap_or(&resource), err.site.clone()),
                Some(err),
            ),
        };
        // bpg: `template` (default false) makes the VM a template to clone, never a node.
        if !telmate && let Some(template) = attr(&["template"])? {
            match template.as_bool() {
                Some(false) => {}
                Some(true) => {
                    out.templates.push(format!(
                        "{}: {address} is a VM template (template = true), not a node",
                        template.site
                    ));
                    continue;
                }
                None => {
                    return Err(RepoError::new(
                        template.site.clone(),
                        format!("{address}: `template` is not a bool"),
                    ));
                }
            }
        }
        let host_path: &[&str] = if telmate {
            &["target_node"]
        } else {
            &["node_name"]
        };
        let (host, host_unknown) = match attr(host_path) {
            Ok(host) => (host, None),
            Err(error) => {
                let text = block
                    .body
                    .get_attribute(host_path[0])
                    .map(|a| source(&a.value, file))
                    .unwrap_or_default();
                let varies = ["count.", "each.", "self."]
                    .iter()
                    .any(|word| text.contains(word));
                let same_as = (!varies).then(|| format!("{}{text}", scope.module_prefix()));
                (None, Some(HostUnknown { error, same_as }))
            }
        };
        let (cores, memory) = if telmate {
            (
                attr(&["cores"])?.or(attr(&["cpu", "cores"])?),
                attr(&["memory"])?,
            )
        } else {
            (attr(&["cpu", "cores"])?, attr(&["memory", "dedicated"])?)
        };
        let addresses = attrs.addresses(telmate);
        let tags = attrs.tags()?;
        out.vms.push(Vm {
            resource: resource.clone(),
            name,
            name_unknown,
            host,
            host_unknown,
            addresses,
            machine_type: None,
            cores,
            memory_mib: memory,
            tags,
        });
    }
    Ok(())
}

fn eval(expr: &Expression, file: &File, scope: &Scope) -> Result<Node, RepoError> {
    let site = file.site(expr.span());
    let scalar = |text: String, plain: bool| Node::new(Value::Scalar(text, plain), site.clone());
    Ok(match expr {
        Expression::Null(_) => Node::new(Value::Null, site),
        Expression::Bool(b) => scalar(b.value().to_string(), true),
        Expression::Number(n) => scalar(n.value().to_string(), true),
        Expression::String(s) => scalar(s.value().to_string(), false),
        Expression::Array(items) => Node::new(
            Value::Seq(
                items
                    .iter()
                    .map(|i| eval(i, file, scope))
                    .collect::<Result<_, _>>()?,
            ),
            site,
        ),
        Expression::Object(object) => {
            let mut entries = Vec::new();
            for (key, value) in object.iter() {
                let key = match key {
                    ObjectKey::Ident(ident) => ident.as_str().to_string(),
                    ObjectKey::Expression(expr) => {
                        let key = eval(expr, file, scope)?;
                        key.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| unknown(expr, file))?
                    }
                };
                entries.push((key, eval(value.expr(), file, scope)?));
            }
            Node::new(Value::Map(entries), site)
        }
        Expression::Parenthesis(inner) => eval(inner.inner(), file, scope)?,
        Expression::Traversal(traversal) => traverse(expr, traversal, file, scope)?,
        Expression::StringTemplate(_)
        | Expression::HeredocTemplate(_)
        | Expression::Variable(_)
        | Expression::Conditional(_)
        | Expression::FuncCall(_)
        | Expression::UnaryOp(_)
        | Expression::BinaryOp(_)
        | Expression::ForExpr(_) => return computed(expr, file, scope),
    })
}

/// A traversal (`var.x.y`, `each.value`, `count.index`, `local.z[0]`): its root's value in
/// `scope`, then each step; a root gates does not hold is evaluated as [`computed`].
fn traverse(
    expr: &Expression,
    traversal: &Traversal,
    file: &File,
    scope: &Scope,
) -> Result<Node, RepoError> {
    let site = file.site(expr.span());
    let Expression::Variable(root) = &traversal.expr else {
        return Err(unknown(expr, file));
    };
    let mut ops = traversal.operators.iter().map(|op| op.value());
    let mut current = match (root.as_str(), ops.next()) {
        ("var", Some(TraversalOperator::GetAttr(name))) => {
            match scope.vars.get(name.as_str()) {
                Some(Ok(value)) => value.clone(),
                // An input gates could not evaluate: its error, not a default.
                Some(Err(err)) => return Err(err.clone()),
                None => {
                    return Err(RepoError::undeclared(
                        site.clone(),
                        format!(
                            "var.{} has no value: no default and not set in tfvars",
                            name.as_str()
                        ),
                    ));
                }
            }
        }
        ("each", Some(TraversalOperator::GetAttr(part))) => match (&scope.each, part.as_str()) {
            (Some((key, _)), "key") => key.clone(),
            (Some((_, value)), "value") => value.clone(),
            _ => return Err(unknown(expr, file)),
        },
        ("count", Some(TraversalOperator::GetAttr(part))) if part.as_str() == "index" => {
            scope.index.clone().ok_or_else(|| unknown(expr, file))?
        }
        _ => return computed(expr, file, scope),
    };
    for op in ops {
        let next = match op {
            TraversalOperator::GetAttr(name) => current.entry(name.as_str()).cloned(),
            TraversalOperator::Index(index) => {
                let index = eval(index, file, scope)?;
                match (&current.value, index.as_str()) {
                    (Value::Map(_), Some(key)) => current.entry(key).cloned(),
                    (Value::Seq(items), Some(i)) => {
                        i.parse::<usize>().ok().and_then(|i| items.get(i).cloned())
                    }
                    _ => None,
                }
            }
            TraversalOperator::LegacyIndex(i) => current
                .as_seq()
                .and_then(|items| items.get(*i.value() as usize).cloned()),
            TraversalOperator::AttrSplat(_) | TraversalOperator::FullSplat(_) => {
                return computed(expr, file, scope);
            }
        };
        current = next.ok_or_else(|| {
            RepoError::new(
                site.clone(),
                format!(
                    "`{}` refers to a value that is not declared",
                    source(expr, file)
                ),
            )
        })?;
    }
    Ok(current)
}

/// A value with the `optional(type, default)` attributes of its object type constraint that
/// it leaves out filled in, as Terraform converts a variable's value: the default, or null;
/// through `map(...)`, `list(...)` and `set(...)` of objects too.
fn with_optional(mut value: Node, typed: Option<&Expression>, file: &File) -> Node {
    let Some(Expression::FuncCall(call)) = typed else {
        return value;
    };
    let args: Vec<&Expression> = call.args.iter().collect();
    match (call.name.name.as_str(), &mut value.value, args.first()) {
        ("object", Value::Map(entries), Some(Expression::Object(attrs))) => {
            for (key, attr) in attrs.iter() {
                let name = match key {
                    ObjectKey::Ident(i) => i.as_str().to_string(),
                    ObjectKey::Expression(e) => match e.as_str() {
                        Some(s) => s.to_string(),
                        None => continue,
                    },
                };
                let attr_type = attr.expr();
                let (inner, default) = match attr_type {
                    Expression::FuncCall(opt) if opt.name.name.as_str() == "optional" => {
                        let mut a = opt.args.iter();
                        (a.next(), Some(a.next()))
                    }
                    other => (Some(other), None),
                };
                match entries.iter_mut().find(|(k, _)| *k == name) {
                    Some((_, present)) => {
                        let filled = with_optional(present.clone(), inner, file);
                        *present = filled;
                    }
                    None => {
                        let Some(default) = default else { continue };
                        let site = file.site(attr_type.span());
                        let filled = match default.map(|d| eval(d, file, &Scope::default())) {
                            Some(Ok(v)) => with_optional(v, inner, file),
                            Some(Err(_)) | None => Node::new(Value::Null, site),
                        };
                        entries.push((name, filled));
                    }
                }
            }
        }
        ("map", Value::Map(entries), Some(inner)) => {
            for (_, v) in entries.iter_mut() {
                *v = with_optional(v.clone(), Some(inner), file);
            }
        }
        ("list" | "set", Value::Seq(items), Some(inner)) => {
            for v in items.iter_mut() {
                *v = with_optional(v.clone(), Some(inner), file);
            }
        }
        _ => {}
    }
    value
}

/// Whether `text` refers to `name` as a whole (`var.a` is not `var.ab`).
fn refers(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        !text[at + name.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    })
}

/// An expression only an evaluator computes, at the expression's line (see [`hcl_eval`]).
/// A variable gates could not evaluate is that variable's error, never a default.
fn computed(expr: &Expression, file: &File, scope: &Scope) -> Result<Node, RepoError> {
    let site = file.site(expr.span());
    let text = source(expr, file);
    for (name, value) in &scope.vars {
        if let Err(err) = value
            && text.contains(&format!("var.{name}"))
        {
            return Err(err.clone());
        }
    }
    if let Some(name) = scope
        .unset
        .iter()
        .find(|n| refers(&text, &format!("var.{n}")))
    {
        return Err(RepoError::undeclared(
            site,
            format!("var.{name} has no value: no default and not set in tfvars"),
        ));
    }
    hcl_eval::evaluate(expr, &scope.names(), &site).map_err(|why| {
        let local = scope
            .local_errors
            .iter()
            .find(|(name, _)| text.contains(&format!("local.{name}")));
        match local {
            // What the repository does not declare stays undeclared through the locals.
            Some((_, err)) if err.undeclared => err.clone(),
            Some((name, err)) => RepoError::new(
                site,
                format!("`{text}` cannot be evaluated: local.{name} cannot be evaluated: {err}"),
            ),
            None => RepoError::new(site, format!("`{text}` cannot be evaluated: {why}")),
        }
    })
}

fn source(expr: &Expression, file: &File) -> String {
    expr.span()
        .and_then(|s| file.text.get(s))
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn unknown(expr: &Expression, file: &File) -> RepoError {
    RepoError::new(
        file.site(expr.span()),
        format!(
            "`{}` is not evaluated by gates (literals, var.*, each.* and count.index are); write the value literally or in tfvars",
            source(expr, file)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::repo::testing::repo;

    const ROOT: &str = r#"variable "nodes" {
  type = map(object({ host = string, role = string }))
}

variable "longhorn_node_roles" {
  type    = list(string)
  default = ["worker"]
}

module "vms" {
  source         = "./modules/vms"
  nodes          = var.nodes
  longhorn_roles = var.longhorn_node_roles
}
"#;

    const MODULE: &str = r#"variable "nodes" {}
variable "longhorn_roles" {
  default = ["worker"]
}

resource "proxmox_virtual_environment_vm" "node" {
  for_each  = var.nodes
  name      = each.key
  node_name = each.value.host
  tags      = ["talos", each.value.role]
  cpu {
    cores = each.value.cores
  }
  memory {
    dedicated = each.value.memory
  }
}
"#;

    const TFVARS: &str = r#"nodes = {
  cp-01 = { host = "pve1", role = "control-plane", cores = 2, memory = 6144 }
  cp-02 = { host = "pve2", role = "control-plane", cores = 2, memory = 6144 }
}
"#;

    #[test]
    fn vms_expand_over_tfvars_with_the_lines_that_set_them() {
        let dir = repo(&[
            ("tf/main.tf", ROOT),
            ("tf/modules/vms/main.tf", MODULE),
            ("tf/env/staging.tfvars", TFVARS),
        ]);
        let tf = load(dir.path(), "tf", Some("tf/env/staging.tfvars")).unwrap();
        assert_eq!(tf.vms.len(), 2);
        let vm = &tf.vms[1];
        assert_eq!(vm.name(), "cp-02");
        let host = vm.host.as_ref().unwrap();
        assert_eq!(
            (host.as_str(), host.site.to_string().as_str()),
            (Some("pve2"), "tf/env/staging.tfvars:3")
        );
        assert_eq!(vm.memory_mib.as_ref().unwrap().as_i64(), Some(6144));
        assert!(vm.has_tag("control-plane"));
        let roles: Vec<_> = tf
            .variables
            .iter()
            .filter(|v| v.name.contains("longhorn"))
            .collect();
        assert_eq!(roles.len(), 2);
        assert_eq!(
            roles[0].default.as_ref().unwrap().site.to_string(),
            "tf/main.tf:7"
        );
        assert_eq!(roles[1].qualified(), "module.vms.var.longhorn_roles");
        assert_eq!(
            tf.module_inputs["module.vms.var.longhorn_roles"].show(),
            "[worker]"
        );
    }

    #[test]
    fn telmate_vms_read_target_node_and_tag_strings() {
        let dir = repo(&[(
            "tf/vm.tf",
            "resource \"proxmox_vm_qemu\" \"cp\" {\n  count       = 1\n  name        = \"cp-01\"\n  target_node = \"pve3\"\n  cores       = 2\n  memory      = 8192\n  tags        = \"talos;control-plane\"\n}\n",
        )]);
        let tf = load(dir.path(), "tf", None).unwrap();
        assert_eq!(tf.vms.len(), 1);
        assert_eq!(tf.vms[0].host.as_ref().unwrap().as_str(), Some("pve3"));
        assert!(tf.vms[0].has_tag("control-plane"));
    }

    #[test]
    fn a_host_known_only_after_apply_is_unknown_naming_the_line_and_the_vm_is_still_read() {
        let dir = repo(&[(
            "tf/vm.tf",
            "resource \"proxmox_vm_qemu\" \"cp\" {\n  name        = \"cp\"\n  target_node = lookup(data.proxmox_nodes.all.names, \"cp\")\n}\n",
        )]);
        let tf = load(dir.path(), "tf", None).unwrap();
        let unknown = tf.vms[0]
            .host_unknown
            .as_ref()
            .expect("the host is unknown");
        let text = unknown.error.to_string();
        assert!(
            text.starts_with(
                "tf/vm.tf:3: `lookup(data.proxmox_nodes.all.names, \"cp\")` cannot be evaluated"
            ) && text.contains("`data`"),
            "{text}"
        );
        assert_eq!(
            unknown.same_as.as_deref(),
            Some("lookup(data.proxmox_nodes.all.names, \"cp\")")
        );
    }

    #[test]
    fn a_role_comes_from_the_talos_configuration_applied_to_the_vms_address() {
        // kubebn's shape: VMs by `count`, addresses in Telmate's ipconfig0, and one apply per
        // node naming its address and a configuration with a literal machine_type.
        let dir = repo(&[(
            "tf/main.tf",
            r#"variable "host" {}
variable "first" { default = "5" }
resource "proxmox_vm_qemu" "cp" {
  count       = 2
  name        = "cp-${count.index}"
  target_node = var.host
  ipconfig0   = "ip=${cidrhost("10.1.1.0/24", var.first + "${count.index}")}/24,gw=10.1.1.1"
}
resource "proxmox_vm_qemu" "w" {
  name        = "w-0"
  target_node = "pve9"
  ipconfig0   = "ip=10.1.1.9/24"
}
data "talos_machine_configuration" "cp" {
  machine_type = "controlplane"
}
data "talos_machine_configuration" "w" {
  machine_type = "worker"
}
resource "talos_machine_configuration_apply" "cp0" {
  machine_configuration_input = data.talos_machine_configuration.cp.machine_configuration
  node                        = cidrhost("10.1.1.0/24", var.first)
}
resource "talos_machine_configuration_apply" "cp1" {
  machine_configuration_input = data.talos_machine_configuration.cp.machine_configuration
  node                        = "10.1.1.6"
}
resource "talos_machine_configuration_apply" "w0" {
  machine_configuration_input = data.talos_machine_configuration.w.machine_configuration
  node                        = "10.1.1.9"
}
"#,
        )]);
        let tf = load(dir.path(), "tf", None).unwrap();
        let roles: Vec<(&str, Option<bool>, Vec<String>)> = tf
            .vms
            .iter()
            .map(|v| {
                (
                    v.name(),
                    v.machine_type.as_ref().map(|(r, _)| *r),
                    v.addresses.clone(),
                )
            })
            .collect();
        assert_eq!(
            roles,
            [
                ("cp-0", Some(true), vec!["10.1.1.5".to_string()]),
                ("cp-1", Some(true), vec!["10.1.1.6".to_string()]),
                ("w-0", Some(false), vec!["10.1.1.9".to_string()]),
            ]
        );
        // One host expression for both control planes, whatever its value.
        assert_eq!(
            tf.vms[0]
                .host_unknown
                .as_ref()
                .and_then(|h| h.same_as.as_deref()),
            Some("var.host")
        );
        assert_eq!(
            tf.vms[1]
                .host_unknown
                .as_ref()
                .and_then(|h| h.same_as.as_deref()),
            Some("var.host")
        );
    }

    #[test]
    fn a_name_known_only_after_apply_leaves_the_vm_read_with_its_name_unknown_and_templates_are_no_nodes()
     {
        let dir = repo(&[(
            "tf/vm.tf",
            "resource \"random_integer\" \"id\" {\n  min = 1\n  max = 9\n}\nresource \"proxmox_virtual_environment_vm\" \"nodes\" {\n  for_each  = { cp-a = \"pve1\", cp-b = \"pve2\" }\n  name      = \"cp-${random_integer.id.result}\"\n  node_name = each.value\n  tags      = [\"controlplane\"]\n}\nresource \"proxmox_virtual_environment_vm\" \"template\" {\n  name      = \"talos-template\"\n  node_name = \"pve1\"\n  template  = true\n}\n",
        )]);
        let tf = load(dir.path(), "tf", None).unwrap();
        let vms: Vec<(&str, Option<&str>, bool)> = tf
            .vms
            .iter()
            .map(|v| {
                (
                    v.name(),
                    v.host.as_ref().and_then(|h| h.as_str()),
                    v.name_unknown.is_some(),
                )
            })
            .collect();
        assert_eq!(
            vms,
            [("cp-a", Some("pve1"), true), ("cp-b", Some("pve2"), true)]
        );
        let why = tf.vms[0].name_unknown.as_ref().unwrap().to_string();
        assert!(
            why.starts_with("tf/vm.tf:7:") && why.contains("random_integer"),
            "{why}"
        );
        assert_eq!(
            tf.templates,
            [
                "tf/vm.tf:14: proxmox_virtual_environment_vm.template is a VM template (template = true), not a node"
            ]
        );
    }

    #[test]
    fn optional_object_attributes_a_value_leaves_out_take_their_type_defaults() {
        let dir = repo(&[(
            "tf/main.tf",
            r#"variable "cluster" {
  type = object({
    name  = string
    cores = optional(number, 4)
    vlan  = optional(number)
  })
  default = { name = "prod" }
}
resource "proxmox_virtual_environment_vm" "cp" {
  name        = "${var.cluster.name}-cp"
  description = var.cluster.vlan == null ? "untagged" : "tagged"
  cpu { cores = var.cluster.cores }
}
"#,
        )]);
        let tf = load(dir.path(), "tf", None).unwrap();
        let cores = tf.vms[0].cores.as_ref().unwrap();
        assert_eq!((cores.as_i64(), cores.site.line), (Some(4), 4));
        assert_eq!(tf.vms[0].name(), "prod-cp");
    }

    #[test]
    fn auto_tfvars_and_module_instances_are_read_as_terraform_reads_them() {
        let dir = repo(&[
            (
                "tf/main.tf",
                "variable \"nodes\" {}\nvariable \"size\" { default = 1 }\nmodule \"vm\" {\n  source   = \"./vm\"\n  for_each = var.nodes\n  name     = each.key\n  host     = each.value\n  cores    = var.size\n}\n",
            ),
            (
                "tf/terraform.tfvars",
                "size = 2\nnodes = { a = \"pve1\" }\n",
            ),
            (
                "tf/b.auto.tfvars",
                "nodes = { cp-1 = \"pve1\", cp-2 = \"pve2\" }\n",
            ),
            ("tf/a.auto.tfvars", "size = 4\n"),
            (
                "tf/vm/main.tf",
                "variable \"name\" {}\nvariable \"host\" {}\nvariable \"cores\" {}\nresource \"proxmox_virtual_environment_vm\" \"this\" {\n  name      = var.name\n  node_name = var.host\n  cpu { cores = var.cores }\n}\n",
            ),
        ]);
        let tf = load(dir.path(), "tf", None).unwrap();
        let vms: Vec<(&str, &str, Option<i64>)> = tf
            .vms
            .iter()
            .map(|vm| {
                let host = vm.host.as_ref().and_then(Node::as_str).unwrap_or("?");
                (vm.name(), host, vm.cores.as_ref().and_then(Node::as_i64))
            })
            .collect();
        assert_eq!(
            vms,
            [("cp-1", "pve1", Some(4)), ("cp-2", "pve2", Some(4))],
            "b.auto.tfvars overrides terraform.tfvars; a.auto.tfvars sets size"
        );
        assert_eq!(
            tf.vms[0].host.as_ref().unwrap().site.file,
            "tf/b.auto.tfvars"
        );
    }

    #[test]
    fn templates_locals_conditionals_and_functions_in_vms_evaluate_at_their_lines() {
        let dir = repo(&[(
            "tf/vm.tf",
            r#"variable "cluster" { default = "prod" }
variable "ha" { default = true }
locals {
  count = var.ha ? 3 : 1
  hosts = ["pve1", "pve2", "pve3"]
  nodes = { for i in range(local.count) : format("%s-cp-%02d", var.cluster, i + 1) => element(local.hosts, i) }
}
resource "proxmox_virtual_environment_vm" "cp" {
  for_each  = local.nodes
  name      = each.key
  node_name = each.value
  tags      = [var.ha ? "controlplane" : "single", "talos"]
  cpu { cores = 2 * 2 }
}
"#,
        )]);
        let tf = load(dir.path(), "tf", None).unwrap();
        let names: Vec<(&str, &str)> = tf
            .vms
            .iter()
            .map(|vm| {
                (
                    vm.name(),
                    vm.host.as_ref().and_then(Node::as_str).unwrap_or("?"),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("prod-cp-01", "pve1"),
                ("prod-cp-02", "pve2"),
                ("prod-cp-03", "pve3")
            ]
        );
        let vm = &tf.vms[0];
        assert!(vm.has_tag("controlplane"), "{:?}", vm.tags);
        let cores = vm.cores.as_ref().unwrap();
        assert_eq!((cores.as_i64(), cores.site.line), (Some(4), 13));
    }

    #[test]
    fn malformed_hcl_is_an_error_naming_the_file_and_line() {
        let dir = repo(&[("tf/bad.tf", "variable \"a\" {\n  default = [1, 2\n}\n")]);
        let err = load(dir.path(), "tf", None).unwrap_err();
        assert_eq!(err.site.file, "tf/bad.tf");
        assert!(err.site.line >= 2, "{err}");
        assert!(err.message.starts_with("malformed HCL"), "{err}");
        for text in [
            "resource {",
            "= 1",
            "variable \"a\" { default = \"x }",
            "\u{0}",
        ] {
            let dir = repo(&[("tf/x.tf", text)]);
            assert!(load(dir.path(), "tf", None).is_err(), "{text:?}");
        }
    }

    #[test]
    fn registry_modules_are_recorded_as_unread() {
        let dir = repo(&[(
            "tf/main.tf",
            "module \"k8s\" {\n  source  = \"bpg/talos/proxmox\"\n  version = \"1.0\"\n}\n",
        )]);
        let tf = load(dir.path(), "tf", None).unwrap();
        assert_eq!(tf.unread_modules.len(), 1);
        assert!(
            tf.unread_modules[0].starts_with("tf/main.tf:1: module k8s"),
            "{:?}",
            tf.unread_modules
        );
    }

    #[test]
    fn a_variable_without_a_value_is_an_error_when_a_vm_needs_it() {
        let dir = repo(&[("tf/main.tf", ROOT), ("tf/modules/vms/main.tf", MODULE)]);
        let err = load(dir.path(), "tf", None).unwrap_err();
        assert!(err.message.contains("var.nodes has no value"), "{err}");
    }

    #[test]
    fn every_prefix_of_a_real_module_parses_or_errors_without_panicking() {
        let text = include_str!(
            "../../../fixtures/repo/staging-today/terraform/modules/talos_vms/main.tf"
        );
        for end in (0..text.len()).filter(|i| text.is_char_boundary(*i)) {
            if let Err(err) = parse_text("main.tf", text[..end].to_string()) {
                assert!(err.site.line >= 1, "{err}");
            }
        }
    }

    #[test]
    fn a_module_input_gates_cannot_evaluate_is_an_error_not_the_module_default() {
        let root = ROOT.replace(
            "longhorn_roles = var.longhorn_node_roles",
            "longhorn_roles = var.longhorn_node_roles\n  nodes_extra    = merge(var.nodes, data.extra.nodes)",
        );
        let module = MODULE.replace("for_each  = var.nodes", "for_each  = var.nodes_extra")
            + "variable \"nodes_extra\" {\n  default = {}\n}\n";
        let dir = repo(&[
            ("tf/main.tf", &root),
            ("tf/modules/vms/main.tf", &module),
            ("tf/env/staging.tfvars", TFVARS),
        ]);
        let err = load(dir.path(), "tf", Some("tf/env/staging.tfvars")).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "tf/main.tf:14: `merge(var.nodes, data.extra.nodes)` cannot be evaluated"
            ),
            "{err}"
        );
    }
}
