//! Terraform expressions the site-keeping reader does not evaluate itself (string templates,
//! conditionals, operators, `for` expressions, splats, `local.*` and function calls) are
//! evaluated by hcl-rs's evaluator with Terraform's functions declared in [`functions`]. The
//! value then carries the line of the expression that computed it.
//!
//! What only `terraform apply` knows (a resource's or data source's attributes, a registry
//! module's outputs) is an undefined variable to the evaluator: an error naming the expression
//! and what it refers to, never a guess.

use hcl::Value as Hcl;
use hcl::eval::{Context, Evaluate, FuncArgs, FuncDef, ParamType};
use hcl_edit::expr::Expression;

use crate::repo::site::Site;
use crate::repo::yaml::{Node, Value};

gates_core::sentence_error! {
    /// What a Terraform expression or template could not be evaluated for, as the sentence the
    /// trials quote.
    pub struct EvalError;
}

gates_core::sentence_error! {
    /// Why one of Terraform's functions in [`functions`] refused its arguments. hcl-rs calls a
    /// function as `hcl::eval::Func`, whose error is a bare string: [`func!`] turns this one
    /// into that string where a function is handed over, and hcl-rs reports it unchanged.
    pub struct FuncError;
}

impl From<EvalError> for FuncError {
    fn from(e: EvalError) -> Self {
        FuncError(e.0)
    }
}

/// A function of [`functions`] as hcl-rs calls it, where an `hcl::eval::Func` is expected (an
/// `fn` that returns its error as a string, which this is the one place to make): a named
/// function, or a closure `|a| ...` whose body returns `Result<Hcl, FuncError>`. It captures
/// nothing, so it coerces to the `fn` pointer.
macro_rules! func {
    (|$a:ident| $body:expr) => {
        |$a| {
            let call = || -> Result<Hcl, FuncError> { $body };
            call().map_err(|e| e.0)
        }
    };
    ($f:ident) => {
        |a| $f(a).map_err(|e| e.0)
    };
}

/// The names an expression may refer to, as hcl-rs values.
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub var: Vec<(String, Hcl)>,
    pub local: Vec<(String, Hcl)>,
    pub each: Option<(Hcl, Hcl)>,
    pub count: Option<Hcl>,
    /// Where `path.*` and `file()` point; `None` where no file may be read (tfvars).
    pub files: Option<Files>,
}

/// The repository and the directories `path.module` and `path.root` name, repository-relative.
#[derive(Debug, Clone)]
pub struct Files {
    pub repo: std::path::PathBuf,
    pub module: String,
    pub root: String,
}

thread_local! {
    /// The repository `file()` reads during one evaluation: a function of hcl-rs is a plain
    /// `fn` and cannot hold it.
    static REPOSITORY: std::cell::RefCell<Option<std::path::PathBuf>> =
        const { std::cell::RefCell::new(None) };
}

/// `file(path)`: the text of a file of the repository (`path` repository-relative, as
/// `path.module` and `path.root` are here); a path that leaves the repository is refused.
fn file(a: FuncArgs) -> Result<Hcl, FuncError> {
    Ok(Hcl::String(read_file(&s(&a, 0))?))
}

fn read_file(wanted: &str) -> Result<String, EvalError> {
    let mut parts: Vec<&str> = Vec::new();
    for part in wanted.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or_else(|| {
                    EvalError(format!("file(\"{wanted}\") leaves the repository"))
                })?;
            }
            p => parts.push(p),
        }
    }
    if wanted.starts_with('/') || wanted.starts_with('~') {
        return Err(EvalError(format!(
            "file(\"{wanted}\") is outside the repository"
        )));
    }
    let repo = REPOSITORY
        .with(|r| r.borrow().clone())
        .ok_or_else(|| EvalError(format!("file(\"{wanted}\") cannot be read here")))?;
    std::fs::read_to_string(repo.join(parts.join("/")))
        .map_err(|e| EvalError(format!("file(\"{wanted}\"): {e}")))
}

/// The names of [`functions`], built once.
static FUNCTION_NAMES: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| functions().into_iter().map(|(name, _)| name).collect());

/// Evaluate `expr`; the error says what could not be known.
pub fn evaluate(expr: &Expression, names: &Names, site: &Site) -> Result<Node, EvalError> {
    let mut expr: hcl::Expression = expr.clone().into();
    rewrite_try(&mut expr);
    let mut ctx = Context::new();
    ctx.declare_var("var", object(&names.var));
    ctx.declare_var("local", object(&names.local));
    if let Some((key, value)) = &names.each {
        ctx.declare_var(
            "each",
            object(&[("key".into(), key.clone()), ("value".into(), value.clone())]),
        );
    }
    if let Some(index) = &names.count {
        ctx.declare_var("count", object(&[("index".into(), index.clone())]));
    }
    if let Some(files) = &names.files {
        ctx.declare_var(
            "path",
            object(&[
                ("module".into(), Hcl::String(files.module.clone())),
                ("root".into(), Hcl::String(files.root.clone())),
                ("cwd".into(), Hcl::String(files.root.clone())),
            ]),
        );
    }
    for (name, def) in functions() {
        ctx.declare_func(name, def);
    }
    let repo = names.files.as_ref().map(|f| f.repo.clone());
    let previous = REPOSITORY.with(|r| r.replace(repo));
    let value = expr.evaluate(&ctx);
    REPOSITORY.with(|r| *r.borrow_mut() = previous);
    let value = value.map_err(|e| match e.kind() {
        hcl::eval::ErrorKind::UndefinedVar(name) => format!(
            "it refers to `{name}`, which is known only after `terraform apply` or outside the repository"
        ),
        hcl::eval::ErrorKind::NoSuchKey(key) => {
            format!("it refers to `{key}`, which is not declared (or known only after apply)")
        }
        _ => e.to_string(),
    })?;
    Ok(to_node(&value, site))
}

/// Render a `templatefile` template as Terraform does: `${...}` interpolations and
/// `%{if}`/`%{for}` directives over the variables given (top-level names) and Terraform's
/// functions; the error says what could not be rendered.
pub fn render_template(rel: &str, text: &str, vars: &Node) -> Result<String, EvalError> {
    render(rel, text, &to_hcl(vars))
}

/// Functions whose result may span lines or hold YAML structure: an interpolation that
/// calls one over a value not known may write keys gates cannot see.
const MULTILINE: [&str; 7] = [
    "indent(",
    "yamlencode(",
    "jsonencode(",
    "file(",
    "templatefile(",
    "join(",
    "format(",
];

/// [`render_template`] with some variables not known (`unknown`): each interpolation that
/// reads one writes a placeholder ([`crate::repo::talos::jinja::token`]), returned in order
/// with what it was; `Err` when a directive reads one (the text rendered would depend on
/// it) or an interpolation that reads one may write several lines ([`MULTILINE`]).
pub fn render_template_partly(
    rel: &str,
    text: &str,
    vars: &Node,
    unknown: &[String],
) -> Result<(String, Vec<String>), EvalError> {
    let mut template: hcl::Template = text
        .parse()
        .map_err(|e: hcl::Error| EvalError(format!("{rel}: the template does not parse: {e}")))?;
    let mut exprs = Vec::new();
    mark_unknown(rel, &mut template, unknown, &mut exprs)?;
    let rendered = render_parsed(rel, text, &template, &to_hcl(vars))?;
    Ok((rendered, exprs))
}

/// Whether the expression's text names one of `names` as a variable.
fn reads_any(text: &str, names: &[String]) -> Option<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    names
        .iter()
        .find(|name| {
            text.match_indices(name.as_str()).any(|(at, _)| {
                let before = text[..at].chars().next_back();
                let after = text[at + name.len()..].chars().next();
                !before.is_some_and(|c| ident(c) || c == '.') && !after.is_some_and(ident)
            })
        })
        .cloned()
}

fn mark_unknown(
    rel: &str,
    template: &mut hcl::Template,
    unknown: &[String],
    exprs: &mut Vec<String>,
) -> Result<(), EvalError> {
    use hcl::template::{Directive, Element};
    for element in template.elements_mut() {
        match element {
            Element::Literal(_) => {}
            Element::Interpolation(i) => {
                let text = hcl::format::to_string(&i.expr).unwrap_or_default();
                if let Some(name) = reads_any(&text, unknown) {
                    if MULTILINE.iter().any(|f| text.contains(f)) {
                        return Err(EvalError(format!(
                            "{rel}: `${{{text}}}` reads `{name}`, which gates cannot evaluate, and may write several lines"
                        )));
                    }
                    let n = exprs.len();
                    exprs.push(format!("the templatefile interpolation `${{{text}}}`"));
                    *element = Element::Literal(crate::repo::talos::jinja::token(n));
                }
            }
            Element::Directive(d) => match d.as_mut() {
                Directive::If(dir) => {
                    let cond = hcl::format::to_string(&dir.cond_expr).unwrap_or_default();
                    if let Some(name) = reads_any(&cond, unknown) {
                        return Err(EvalError(format!(
                            "{rel}: the directive `%{{ if {cond} }}` reads `{name}`, which gates cannot evaluate"
                        )));
                    }
                    mark_unknown(rel, &mut dir.true_template, unknown, exprs)?;
                    if let Some(f) = &mut dir.false_template {
                        mark_unknown(rel, f, unknown, exprs)?;
                    }
                }
                Directive::For(dir) => {
                    let over = hcl::format::to_string(&dir.collection_expr).unwrap_or_default();
                    if let Some(name) = reads_any(&over, unknown) {
                        return Err(EvalError(format!(
                            "{rel}: the directive `%{{ for ... in {over} }}` reads `{name}`, which gates cannot evaluate"
                        )));
                    }
                    mark_unknown(rel, &mut dir.template, unknown, exprs)?;
                }
            },
        }
    }
    Ok(())
}

/// `templatefile(path, vars)`: [`file`] rendered as [`render_template`] renders it.
fn templatefile(a: FuncArgs) -> Result<Hcl, FuncError> {
    let path = s(&a, 0);
    let text = read_file(&path)?;
    Ok(Hcl::String(render(&path, &text, &a[1])?))
}

fn render(rel: &str, text: &str, vars: &Hcl) -> Result<String, EvalError> {
    let template: hcl::Template = text
        .parse()
        .map_err(|e: hcl::Error| EvalError(format!("{rel}: the template does not parse: {e}")))?;
    render_parsed(rel, text, &template, vars)
}

fn render_parsed(
    rel: &str,
    text: &str,
    template: &hcl::Template,
    vars: &Hcl,
) -> Result<String, EvalError> {
    let mut ctx = Context::new();
    if let Hcl::Object(entries) = vars {
        for (name, value) in entries {
            ctx.declare_var(name.as_str(), value.clone());
        }
    }
    for (name, def) in functions() {
        ctx.declare_func(name, def);
    }
    template.evaluate(&ctx).map_err(|e| match e.kind() {
        hcl::eval::ErrorKind::UndefinedVar(name) => {
            // The first line that interpolates the name, for the message.
            let line = text
                .lines()
                .position(|l| {
                    let inside = |open: &str| {
                        l.split(open)
                            .skip(1)
                            .any(|part| part.contains(name.as_str()))
                    };
                    inside("${") || inside("%{")
                })
                .map_or(0, |n| n + 1);
            format!(
                "{}: `${{{name}}}` has no value among the templatefile variables gates could evaluate, so the patch is not read",
                Site::new(rel, line)
            )
        }
        _ => format!("{rel}: {e}"),
    })
    .map_err(EvalError)
}

/// Terraform's `try` evaluates its arguments lazily, which a function of hcl-rs cannot; the
/// forms configuration uses are rewritten to a conditional, which hcl-rs evaluates lazily:
/// `try(first, fallback...)` becomes `CHECK ? first : try(fallback...)` (see [`try_check`]).
fn rewrite_try(expr: &mut hcl::Expression) {
    use hcl::expr::{Expression as E, TraversalOperator as Op};
    match expr {
        E::Array(items) => items.iter_mut().for_each(rewrite_try),
        E::Object(object) => object.values_mut().for_each(rewrite_try),
        E::Parenthesis(inner) => rewrite_try(inner),
        E::Conditional(c) => {
            rewrite_try(&mut c.cond_expr);
            rewrite_try(&mut c.true_expr);
            rewrite_try(&mut c.false_expr);
        }
        E::Operation(op) => match op.as_mut() {
            hcl::expr::Operation::Unary(u) => rewrite_try(&mut u.expr),
            hcl::expr::Operation::Binary(b) => {
                rewrite_try(&mut b.lhs_expr);
                rewrite_try(&mut b.rhs_expr);
                // Terraform converts a string that reads as a number where arithmetic or
                // an ordering needs one ("5" + "0" is 5).
                use hcl::expr::BinaryOperator as B;
                if matches!(
                    b.operator,
                    B::Plus
                        | B::Minus
                        | B::Mul
                        | B::Div
                        | B::Mod
                        | B::Less
                        | B::Greater
                        | B::LessEq
                        | B::GreaterEq
                ) {
                    for side in [&mut b.lhs_expr, &mut b.rhs_expr] {
                        let mut call = hcl::expr::FuncCall::new("__num");
                        call.args = vec![side.clone()];
                        *side = E::FuncCall(Box::new(call));
                    }
                }
            }
        },
        E::ForExpr(f) => {
            rewrite_try(&mut f.collection_expr);
            f.key_expr.iter_mut().for_each(rewrite_try);
            rewrite_try(&mut f.value_expr);
            f.cond_expr.iter_mut().for_each(rewrite_try);
        }
        E::Traversal(t) => {
            rewrite_try(&mut t.expr);
            for op in &mut t.operators {
                if let Op::Index(i) = op {
                    rewrite_try(i);
                }
            }
        }
        E::FuncCall(call) => {
            call.args.iter_mut().for_each(rewrite_try);
            let is_try = call.name.namespace.is_empty() && call.name.name.as_str() == "try";
            if is_try
                && call.args.len() >= 2
                && let Some(check) = try_check(&call.args[0])
            {
                // The fallbacks stay unevaluated unless the first argument fails, as in
                // Terraform (a fallback may call `error(...)` or read what is not there).
                let first = call.args[0].clone();
                let rest = if call.args.len() == 2 {
                    call.args[1].clone()
                } else {
                    let mut inner = hcl::expr::FuncCall::new("try");
                    inner.args = call.args[1..].to_vec();
                    let mut inner = E::FuncCall(Box::new(inner));
                    rewrite_try(&mut inner);
                    inner
                };
                *expr = E::Conditional(Box::new(hcl::expr::Conditional::new(check, first, rest)));
            }
        }
        // A string template's interpolations are expressions too: rewritten in place, the
        // template written back (only when it parses; else it stays as written).
        E::TemplateExpr(t) => {
            if let hcl::expr::TemplateExpr::QuotedString(_) = t.as_ref()
                && let Ok(mut template) = hcl::template::Template::from_expr(t)
            {
                let mut changed = false;
                for element in template.elements_mut() {
                    if let hcl::template::Element::Interpolation(i) = element {
                        let before = i.expr.clone();
                        rewrite_try(&mut i.expr);
                        changed |= i.expr != before;
                    }
                }
                if changed {
                    **t = hcl::expr::TemplateExpr::QuotedString(template.to_string());
                }
            }
        }
        E::Null | E::Bool(_) | E::Number(_) | E::String(_) | E::Variable(_) => {}
        _ => {}
    }
}

/// The test that makes `try(first, ...)` take `first`, for the forms configuration uses:
/// a lookup that may be missing (`a.b[c]`: `__has_path(a, ["b", c])`) and a function that
/// may fail on its arguments (`f(args)`: `__call_ok("f", args...)`, whose arguments are
/// evaluated as they are, so an unknown among them stays an error). Any other first
/// argument is evaluated eagerly: an error there stays an error, never a fallback guessed in
/// its place.
fn try_check(first: &hcl::Expression) -> Option<hcl::Expression> {
    use hcl::expr::{Expression as E, TraversalOperator as Op};
    match first {
        E::Traversal(t) => {
            let keys: Option<Vec<E>> = t
                .operators
                .iter()
                .map(|op| match op {
                    Op::GetAttr(name) => Some(E::String(name.to_string())),
                    Op::Index(i) => Some(i.clone()),
                    Op::LegacyIndex(i) => Some(E::Number((*i).into())),
                    Op::AttrSplat | Op::FullSplat => None,
                })
                .collect();
            let mut call = hcl::expr::FuncCall::new("__has_path");
            call.args = vec![t.expr.clone(), E::Array(keys?)];
            Some(E::FuncCall(Box::new(call)))
        }
        E::FuncCall(inner)
            if inner.name.namespace.is_empty()
                && FUNCTION_NAMES.contains(&inner.name.name.as_str()) =>
        {
            let mut call = hcl::expr::FuncCall::new("__call_ok");
            call.args = std::iter::once(E::String(inner.name.name.to_string()))
                .chain(inner.args.iter().cloned())
                .collect();
            Some(E::FuncCall(Box::new(call)))
        }
        _ => None,
    }
}

/// `__call_ok(name, args...)`: whether `name(args...)` succeeds on the evaluated arguments.
fn call_ok(a: FuncArgs) -> Result<Hcl, FuncError> {
    let values = a.into_values();
    let Some(Hcl::String(name)) = values.first() else {
        return Err("__call_ok: malformed rewrite".into());
    };
    let call = values[1..]
        .iter()
        .cloned()
        .fold(hcl::expr::FuncCall::builder(name.as_str()), |b, v| {
            b.arg(hcl::Expression::from(v))
        })
        .build();
    let mut ctx = Context::new();
    for (fname, def) in functions() {
        ctx.declare_func(fname, def);
    }
    Ok(Hcl::Bool(
        hcl::Expression::FuncCall(Box::new(call))
            .evaluate(&ctx)
            .is_ok(),
    ))
}

/// `__has_path(root, [keys])`: whether every step of the path exists below `root`.
fn has_path(a: FuncArgs) -> Result<Hcl, FuncError> {
    let mut current = Some(a[0].clone());
    for key in items(&a[1])? {
        current = match (current, &key) {
            (Some(Hcl::Object(o)), k) => o.get(&plain(k)?).cloned(),
            (Some(Hcl::Array(list)), Hcl::Number(n)) => {
                n.as_u64().and_then(|i| list.get(i as usize).cloned())
            }
            _ => None,
        };
    }
    Ok(Hcl::Bool(current.is_some()))
}

fn object(entries: &[(String, Hcl)]) -> Hcl {
    Hcl::Object(entries.iter().cloned().collect())
}

/// A value read with sites, as hcl-rs sees it: a plain scalar that reads as a number or a
/// bool is one, as Terraform converts it where a number or bool is expected.
pub fn to_hcl(node: &Node) -> Hcl {
    match &node.value {
        Value::Null => Hcl::Null,
        Value::Scalar(text, plain) => {
            if *plain {
                if let Ok(b) = text.parse::<bool>() {
                    return Hcl::Bool(b);
                }
                if let Ok(i) = text.parse::<i64>() {
                    return Hcl::from(i);
                }
                if let Some(n) = text.parse::<f64>().ok().and_then(hcl::Number::from_f64) {
                    return Hcl::Number(n);
                }
            }
            Hcl::String(text.clone())
        }
        Value::Seq(items) => Hcl::Array(items.iter().map(to_hcl).collect()),
        Value::Map(entries) => Hcl::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_hcl(v)))
                .collect(),
        ),
    }
}

/// An evaluated value, every part at the expression's site.
pub fn to_node(value: &Hcl, site: &Site) -> Node {
    let v = match value {
        Hcl::Null => Value::Null,
        Hcl::Bool(b) => Value::Scalar(b.to_string(), true),
        Hcl::Number(n) => Value::Scalar(n.to_string(), true),
        Hcl::String(s) => Value::Scalar(s.clone(), false),
        Hcl::Array(items) => Value::Seq(items.iter().map(|i| to_node(i, site)).collect()),
        Hcl::Object(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_node(v, site)))
                .collect(),
        ),
    };
    Node::new(v, site.clone())
}

/// A number, or a string that reads as one: Terraform converts such a string where a number
/// is expected ("5" + 1 is 6), and [`f`] reads both.
fn num_like() -> ParamType {
    ParamType::one_of([ParamType::Number, ParamType::String])
}

/// Terraform's functions that configuration like the corpus's uses where a trial reads a
/// value. Each follows Terraform's documented behaviour for the types it accepts; anything
/// else is an error from the call, not a guess.
pub fn functions() -> Vec<(&'static str, FuncDef)> {
    [
        conversions(),
        strings(),
        collections(),
        numbers_and_networks(),
        files_and_encodings(),
    ]
    .concat()
}

/// A function of any number of `p` arguments.
fn variadic(p: ParamType, f: hcl::eval::Func) -> FuncDef {
    FuncDef::builder().variadic_param(p).build(f)
}

/// Case, trimming and the conversions between types (`tostring`, `tolist`, ...), and `length`.
fn conversions() -> Vec<(&'static str, FuncDef)> {
    use ParamType::{Any, String as Str};
    vec![
        (
            "lower",
            FuncDef::builder()
                .param(Str)
                .build(func!(|a| Ok(Hcl::String(s(&a, 0).to_lowercase())))),
        ),
        (
            "upper",
            FuncDef::builder()
                .param(Str)
                .build(func!(|a| Ok(Hcl::String(s(&a, 0).to_uppercase())))),
        ),
        (
            "trimspace",
            FuncDef::builder()
                .param(Str)
                .build(func!(|a| Ok(Hcl::String(s(&a, 0).trim().to_string())))),
        ),
        (
            "tostring",
            FuncDef::builder()
                .param(Any)
                .build(func!(|a| Ok(Hcl::String(plain(&a[0])?)))),
        ),
        (
            "tonumber",
            FuncDef::builder().param(Any).build(func!(tonumber)),
        ),
        (
            "tolist",
            FuncDef::builder()
                .param(Any)
                .build(func!(|a| Ok(Hcl::Array(items(&a[0])?)))),
        ),
        (
            "toset",
            FuncDef::builder()
                .param(Any)
                .build(func!(|a| Ok(Hcl::Array(dedupe(items(&a[0])?))))),
        ),
        (
            "tomap",
            FuncDef::builder()
                .param(ParamType::object_of(Any))
                .build(func!(|a| Ok(a[0].clone()))),
        ),
        ("length", FuncDef::builder().param(Any).build(func!(length))),
    ]
}

/// Strings split, joined and cut.
fn strings() -> Vec<(&'static str, FuncDef)> {
    use ParamType::{Any, String as Str};
    vec![
        (
            "join",
            FuncDef::builder()
                .param(Str)
                .variadic_param(ParamType::array_of(Any))
                .build(func!(join)),
        ),
        (
            "split",
            FuncDef::builder().params([Str, Str]).build(func!(|a| {
                Ok(Hcl::Array(
                    s(&a, 1)
                        .split(s(&a, 0).as_str())
                        .map(|p| Hcl::String(p.into()))
                        .collect(),
                ))
            })),
        ),
        (
            "replace",
            FuncDef::builder()
                .params([Str, Str, Str])
                .build(func!(replace)),
        ),
        (
            "substr",
            FuncDef::builder()
                .params([Str, num_like(), num_like()])
                .build(func!(substr)),
        ),
    ]
}

/// Lists and maps: built, merged, searched and flattened; `range`, `max` and `min`.
fn collections() -> Vec<(&'static str, FuncDef)> {
    use ParamType::{Any, String as Str};
    vec![
        (
            "concat",
            variadic(
                ParamType::array_of(Any),
                func!(|a| {
                    Ok(Hcl::Array(
                        a.iter()
                            .flat_map(|v| items(v).unwrap_or_default())
                            .collect(),
                    ))
                }),
            ),
        ),
        (
            "merge",
            variadic(ParamType::nullable(ParamType::object_of(Any)), func!(merge)),
        ),
        (
            "keys",
            FuncDef::builder()
                .param(ParamType::object_of(Any))
                .build(func!(|a| match &a[0] {
                    Hcl::Object(o) => Ok(Hcl::Array(
                        o.keys().map(|k| Hcl::String(k.clone())).collect(),
                    )),
                    _ => Err("keys: not an object".into()),
                })),
        ),
        (
            "values",
            FuncDef::builder()
                .param(ParamType::object_of(Any))
                .build(func!(|a| match &a[0] {
                    Hcl::Object(o) => Ok(Hcl::Array(o.values().cloned().collect())),
                    _ => Err("values: not an object".into()),
                })),
        ),
        (
            "lookup",
            FuncDef::builder()
                .params([ParamType::object_of(Any), Str])
                .variadic_param(Any)
                .build(func!(lookup)),
        ),
        (
            "element",
            FuncDef::builder()
                .params([ParamType::array_of(Any), num_like()])
                .build(func!(element)),
        ),
        (
            "contains",
            FuncDef::builder()
                .params([ParamType::array_of(Any), Any])
                .build(func!(|a| Ok(Hcl::Bool(items(&a[0])?.contains(&a[1]))))),
        ),
        (
            "distinct",
            FuncDef::builder()
                .param(ParamType::array_of(Any))
                .build(func!(|a| Ok(Hcl::Array(dedupe(items(&a[0])?))))),
        ),
        (
            "flatten",
            FuncDef::builder()
                .param(ParamType::array_of(Any))
                .build(func!(|a| Ok(Hcl::Array(flatten(&a[0]))))),
        ),
        (
            "zipmap",
            FuncDef::builder()
                .params([ParamType::array_of(Str), ParamType::array_of(Any)])
                .build(func!(zipmap)),
        ),
        ("range", variadic(num_like(), func!(range))),
        (
            "coalesce",
            variadic(
                Any,
                func!(|a| {
                    a.iter()
                        .find(|v| !matches!(v, Hcl::Null) && **v != Hcl::String(String::new()))
                        .cloned()
                        .ok_or_else(|| FuncError::from("coalesce: no non-null, non-empty argument"))
                }),
            ),
        ),
        ("max", variadic(num_like(), func!(|a| fold(&a, f64::max)))),
        ("min", variadic(num_like(), func!(|a| fold(&a, f64::min)))),
    ]
}

/// Arithmetic, `format`, the CIDR functions, `sum` and `index`.
fn numbers_and_networks() -> Vec<(&'static str, FuncDef)> {
    use ParamType::{Any, String as Str};
    vec![
        (
            "abs",
            FuncDef::builder()
                .param(num_like())
                .build(func!(|a| num(f(&a[0])?.abs()))),
        ),
        (
            "ceil",
            FuncDef::builder()
                .param(num_like())
                .build(func!(|a| num(f(&a[0])?.ceil()))),
        ),
        (
            "floor",
            FuncDef::builder()
                .param(num_like())
                .build(func!(|a| num(f(&a[0])?.floor()))),
        ),
        (
            "format",
            FuncDef::builder()
                .param(Str)
                .variadic_param(Any)
                .build(func!(format)),
        ),
        (
            "cidrhost",
            FuncDef::builder()
                .params([Str, num_like()])
                .build(func!(cidrhost)),
        ),
        (
            "cidrsubnet",
            FuncDef::builder()
                .params([Str, num_like(), num_like()])
                .build(func!(cidrsubnet)),
        ),
        (
            "sum",
            FuncDef::builder()
                .param(ParamType::array_of(num_like()))
                .build(func!(|a| {
                    let total: Result<f64, FuncError> = items(&a[0])?.iter().map(f).sum();
                    num(total?)
                })),
        ),
        (
            "index",
            FuncDef::builder()
                .params([ParamType::array_of(Any), Any])
                .build(func!(|a| {
                    items(&a[0])?
                        .iter()
                        .position(|v| *v == a[1])
                        .map(|i| Hcl::from(i as i64))
                        .ok_or_else(|| FuncError::from("index: the value is not in the list"))
                })),
        ),
    ]
}

/// `try`, files and templates, encodings, and the calls gates rewrites expressions into.
fn files_and_encodings() -> Vec<(&'static str, FuncDef)> {
    use ParamType::{Any, String as Str};
    vec![
        // Any other `try`: its arguments were all evaluated, so the first one is its value.
        (
            "try",
            FuncDef::builder().variadic_param(Any).build(func!(|a| {
                a.iter()
                    .next()
                    .cloned()
                    .ok_or_else(|| FuncError::from("try: no arguments"))
            })),
        ),
        ("file", FuncDef::builder().param(Str).build(func!(file))),
        (
            "base64encode",
            FuncDef::builder().param(Str).build(func!(|a| {
                use base64::Engine;
                Ok(Hcl::String(
                    base64::engine::general_purpose::STANDARD.encode(s(&a, 0)),
                ))
            })),
        ),
        (
            "base64decode",
            FuncDef::builder().param(Str).build(func!(|a| {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(s(&a, 0))
                    .map_err(|e| format!("base64decode: {e}"))?;
                String::from_utf8(bytes)
                    .map(Hcl::String)
                    .map_err(|_| FuncError::from("base64decode: the result is not UTF-8"))
            })),
        ),
        (
            "__num",
            FuncDef::builder()
                .param(num_like())
                .build(func!(|a| num(f(&a[0])?))),
        ),
        // Spaces after every newline, so every line but the first is indented.
        (
            "indent",
            FuncDef::builder()
                .params([num_like(), Str])
                .build(func!(|a| {
                    let n = a[0]
                        .as_u64()
                        .filter(|n| *n <= 1024)
                        .ok_or("indent: the count is not a whole number up to 1024")?;
                    let pad = format!("\n{}", " ".repeat(n as usize));
                    Ok(Hcl::String(s(&a, 1).replace('\n', &pad)))
                })),
        ),
        (
            "templatefile",
            FuncDef::builder()
                .params([Str, Any])
                .build(func!(templatefile)),
        ),
        // Sensitivity is a marking Terraform keeps beside a value; the value is the same.
        (
            "sensitive",
            FuncDef::builder()
                .param(Any)
                .build(func!(|a| Ok(a[0].clone()))),
        ),
        (
            "nonsensitive",
            FuncDef::builder()
                .param(Any)
                .build(func!(|a| Ok(a[0].clone()))),
        ),
        (
            "__call_ok",
            FuncDef::builder()
                .param(Str)
                .variadic_param(Any)
                .build(func!(call_ok)),
        ),
        (
            "__has_path",
            FuncDef::builder()
                .params([Any, ParamType::array_of(Any)])
                .build(func!(has_path)),
        ),
        (
            "jsonencode",
            FuncDef::builder().param(Any).build(func!(|a| {
                serde_json::to_string(&a[0])
                    .map(Hcl::String)
                    .map_err(|e| FuncError(e.to_string()))
            })),
        ),
    ]
}

fn s(args: &FuncArgs, i: usize) -> String {
    args[i].as_str().unwrap_or_default().to_string()
}

fn f(v: &Hcl) -> Result<f64, FuncError> {
    match v {
        Hcl::Number(n) => n
            .as_f64()
            .ok_or_else(|| FuncError::from("not a finite number")),
        Hcl::String(t) => t
            .parse()
            .map_err(|_| FuncError(format!("`{t}` is not a number"))),
        other => Err(FuncError(format!("{other} is not a number"))),
    }
}

fn num(x: f64) -> Result<Hcl, FuncError> {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        return Ok(Hcl::from(x as i64));
    }
    hcl::Number::from_f64(x)
        .map(Hcl::Number)
        .ok_or_else(|| "not a finite number".into())
}

/// A primitive as Terraform converts it to a string.
fn plain(v: &Hcl) -> Result<String, FuncError> {
    match v {
        Hcl::String(t) => Ok(t.clone()),
        Hcl::Number(n) => Ok(n.to_string()),
        Hcl::Bool(b) => Ok(b.to_string()),
        other => Err(FuncError(format!("{other} is not a primitive value"))),
    }
}

fn items(v: &Hcl) -> Result<Vec<Hcl>, FuncError> {
    match v {
        Hcl::Array(a) => Ok(a.clone()),
        Hcl::Null => Ok(Vec::new()),
        other => Err(FuncError(format!("{other} is not a list or set"))),
    }
}

fn dedupe(list: Vec<Hcl>) -> Vec<Hcl> {
    let mut out: Vec<Hcl> = Vec::new();
    for item in list {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn flatten(v: &Hcl) -> Vec<Hcl> {
    match v {
        Hcl::Array(a) => a.iter().flat_map(flatten).collect(),
        other => vec![other.clone()],
    }
}

fn tonumber(a: FuncArgs) -> Result<Hcl, FuncError> {
    match &a[0] {
        Hcl::Null => Ok(Hcl::Null),
        v => num(f(v)?),
    }
}

fn length(a: FuncArgs) -> Result<Hcl, FuncError> {
    let n = match &a[0] {
        Hcl::Array(x) => x.len(),
        Hcl::Object(o) => o.len(),
        Hcl::String(t) => t.chars().count(),
        other => return Err(FuncError(format!("length: {other} has no length"))),
    };
    Ok(Hcl::from(n as i64))
}

fn join(a: FuncArgs) -> Result<Hcl, FuncError> {
    let sep = s(&a, 0);
    let mut parts = Vec::new();
    for list in a.iter().skip(1) {
        for item in items(list)? {
            parts.push(plain(&item)?);
        }
    }
    Ok(Hcl::String(parts.join(&sep)))
}

fn replace(a: FuncArgs) -> Result<Hcl, FuncError> {
    let (text, from, to) = (s(&a, 0), s(&a, 1), s(&a, 2));
    if from.len() > 1 && from.starts_with('/') && from.ends_with('/') {
        return Err("replace with a regular expression is not evaluated by gates".into());
    }
    Ok(Hcl::String(text.replace(&from, &to)))
}

fn substr(a: FuncArgs) -> Result<Hcl, FuncError> {
    let chars: Vec<char> = s(&a, 0).chars().collect();
    let offset = f(&a[1])? as i64;
    let length = f(&a[2])? as i64;
    let start = if offset < 0 {
        chars.len() as i64 + offset
    } else {
        offset
    }
    .clamp(0, chars.len() as i64) as usize;
    let end = if length < 0 {
        chars.len()
    } else {
        (start + length as usize).min(chars.len())
    };
    Ok(Hcl::String(chars[start..end].iter().collect()))
}

fn merge(a: FuncArgs) -> Result<Hcl, FuncError> {
    let mut out = hcl::Map::new();
    for v in a.iter() {
        match v {
            Hcl::Object(o) => out.extend(o.iter().map(|(k, v)| (k.clone(), v.clone()))),
            Hcl::Null => {}
            other => return Err(FuncError(format!("merge: {other} is not an object"))),
        }
    }
    Ok(Hcl::Object(out))
}

fn lookup(a: FuncArgs) -> Result<Hcl, FuncError> {
    let key = s(&a, 1);
    match (&a[0], a.get(2)) {
        (Hcl::Object(o), default) => o
            .get(&key)
            .cloned()
            .or_else(|| default.cloned())
            .ok_or_else(|| FuncError(format!("lookup: no key `{key}` and no default"))),
        (other, _) => Err(FuncError(format!("lookup: {other} is not a map"))),
    }
}

fn element(a: FuncArgs) -> Result<Hcl, FuncError> {
    let list = items(&a[0])?;
    if list.is_empty() {
        return Err("element: the list is empty".into());
    }
    let i = f(&a[1])? as i64;
    if i < 0 {
        return Err("element: a negative index".into());
    }
    Ok(list[i as usize % list.len()].clone())
}

fn zipmap(a: FuncArgs) -> Result<Hcl, FuncError> {
    let keys = items(&a[0])?;
    let values = items(&a[1])?;
    if keys.len() != values.len() {
        return Err("zipmap: the lists differ in length".into());
    }
    Ok(Hcl::Object(
        keys.iter()
            .zip(values)
            .map(|(k, v)| Ok((plain(k)?, v)))
            .collect::<Result<_, FuncError>>()?,
    ))
}

fn range(a: FuncArgs) -> Result<Hcl, FuncError> {
    let n: Vec<f64> = a.iter().map(f).collect::<Result<_, _>>()?;
    let (start, end, step) = match n.as_slice() {
        [end] => (0.0, *end, 1.0),
        [start, end] => (*start, *end, if end >= start { 1.0 } else { -1.0 }),
        [start, end, step] => (*start, *end, *step),
        _ => return Err("range takes one to three numbers".into()),
    };
    if step == 0.0 {
        return Err("range: step 0".into());
    }
    let mut out = Vec::new();
    let mut x = start;
    while (step > 0.0 && x < end) || (step < 0.0 && x > end) {
        out.push(num(x)?);
        x += step;
        if out.len() > 1024 {
            return Err("range: more than 1024 elements".into());
        }
    }
    Ok(Hcl::Array(out))
}

fn fold(a: &FuncArgs, op: fn(f64, f64) -> f64) -> Result<Hcl, FuncError> {
    let mut values = a.iter().map(f);
    let first = values.next().ok_or("needs at least one number")??;
    num(values.try_fold(first, |acc, v| v.map(|v| op(acc, v)))?)
}

/// `format` with the verbs configuration uses: `%s`, `%d`, `%v`, `%%`, and widths like `%02d`.
fn format(a: FuncArgs) -> Result<Hcl, FuncError> {
    let spec = s(&a, 0);
    let mut args = a.iter().skip(1);
    let mut out = String::new();
    let mut chars = spec.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut flags = String::new();
        while let Some(d) = chars
            .peek()
            .copied()
            .filter(|d| d.is_ascii_digit() || *d == '-' || *d == '#')
        {
            flags.push(d);
            chars.next();
        }
        let verb = chars.next().ok_or("format: a trailing %")?;
        if verb == '%' {
            out.push('%');
            continue;
        }
        let arg = args.next().ok_or("format: too few arguments")?;
        let text = match verb {
            // `%#v`: the value as JSON, as jsonencode writes it.
            'v' if flags.contains('#') => serde_json::to_string(arg).map_err(|e| e.to_string())?,
            's' | 'v' => plain(arg)?,
            'd' => (f(arg)? as i64).to_string(),
            'x' => format!("{:x}", f(arg)? as i64),
            'X' => format!("{:X}", f(arg)? as i64),
            other => {
                return Err(FuncError(format!(
                    "format: the verb %{other} is not evaluated by gates"
                )));
            }
        };
        let zero = flags.starts_with('0');
        let left = flags.starts_with('-');
        let width: usize = flags
            .trim_start_matches(['0', '-', '#'])
            .parse()
            .unwrap_or(0);
        if width > 1024 {
            return Err(FuncError(format!(
                "format: a width of {width} is more than gates pads"
            )));
        }
        let pad = width.saturating_sub(text.chars().count());
        match (left, zero) {
            (true, _) => {
                out.push_str(&text);
                out.push_str(&" ".repeat(pad));
            }
            (false, true) => {
                out.push_str(&"0".repeat(pad));
                out.push_str(&text);
            }
            (false, false) => {
                out.push_str(&" ".repeat(pad));
                out.push_str(&text);
            }
        }
    }
    Ok(Hcl::String(out))
}

/// An IPv4 prefix `a.b.c.d/n` as its network address and length, for the `cidr*` functions.
fn ipv4_prefix(prefix: &str, func: &str) -> Result<(u32, u32), FuncError> {
    let (addr, bits) = prefix
        .split_once('/')
        .ok_or(format!("{func}: not a CIDR prefix"))?;
    let addr: std::net::Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("{func}: only IPv4 prefixes are evaluated by gates"))?;
    let bits: u32 = bits
        .parse()
        .ok()
        .filter(|b| *b <= 32)
        .ok_or(format!("{func}: a bad prefix length"))?;
    let base = u32::from(addr) & u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    Ok((base, bits))
}

/// `cidrhost` for IPv4 prefixes; a negative host number counts from the end.
fn cidrhost(a: FuncArgs) -> Result<Hcl, FuncError> {
    let prefix = s(&a, 0);
    let (base, bits) = ipv4_prefix(&prefix, "cidrhost")?;
    let size: i64 = 1i64 << (32 - bits);
    let host = f(&a[1])? as i64;
    let host = if host < 0 { size + host } else { host };
    if !(0..size).contains(&host) {
        return Err(FuncError(format!(
            "cidrhost: host number {host} is outside {prefix}"
        )));
    }
    Ok(Hcl::String(
        std::net::Ipv4Addr::from(base + host as u32).to_string(),
    ))
}

/// `cidrsubnet` for IPv4 prefixes.
fn cidrsubnet(a: FuncArgs) -> Result<Hcl, FuncError> {
    let prefix = s(&a, 0);
    let (base, bits) = ipv4_prefix(&prefix, "cidrsubnet")?;
    let new = f(&a[1])? as u32;
    let net = f(&a[2])? as i64;
    let total = bits + new;
    if total > 32 || net < 0 || net >= (1i64 << new) {
        return Err(FuncError(format!(
            "cidrsubnet: {new} new bits and network {net} do not fit {prefix}"
        )));
    }
    let subnet = base | ((net as u32).checked_shl(32 - total).unwrap_or(0));
    Ok(Hcl::String(format!(
        "{}/{total}",
        std::net::Ipv4Addr::from(subnet)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str, names: &Names) -> Result<Node, String> {
        let expr: Expression = text.parse().unwrap();
        evaluate(&expr, names, &Site::new("main.tf", 3)).map_err(|e| e.0)
    }

    fn names() -> Names {
        Names {
            var: vec![
                ("cluster".into(), Hcl::String("prod".into())),
                ("cps".into(), Hcl::from(3)),
            ],
            local: vec![(
                "nodes".into(),
                hcl::value!({ cp1 = { host = "pve1", role = "controlplane" }, w1 = { host = "pve2", role = "worker" } }),
            )],
            each: Some((Hcl::String("cp1".into()), hcl::value!({ host = "pve1" }))),
            count: Some(Hcl::from(1)),
            files: None,
        }
    }

    #[test]
    fn templates_conditionals_locals_and_for_expressions_evaluate_at_the_expression_line() {
        let n = names();
        let name = eval(r#""${var.cluster}-cp-${count.index + 1}""#, &n).unwrap();
        assert_eq!((name.as_str(), name.site.line), (Some("prod-cp-2"), 3));
        assert_eq!(
            eval(r#"var.cps > 1 ? "ha" : "single""#, &n)
                .unwrap()
                .as_str(),
            Some("ha")
        );
        assert_eq!(eval("each.value.host", &n).unwrap().as_str(), Some("pve1"));
        let cps = eval(
            r#"{ for k, v in local.nodes : k => v if v.role == "controlplane" }"#,
            &n,
        )
        .unwrap();
        assert_eq!(cps.as_map().map(|m| m.len()), Some(1));
    }

    #[test]
    fn terraform_functions_compute_as_documented() {
        let n = names();
        for (expr, want) in [
            (r#"format("talos-%02d", 7)"#, "talos-07"),
            (r#"format("aa:%02X", 11)"#, "aa:0B"),
            (r#"join(",", ["a", "b"])"#, "a,b"),
            (r#"lower(upper("Ab"))"#, "ab"),
            (r#"cidrhost("10.0.0.0/24", 11)"#, "10.0.0.11"),
            (r#"cidrhost("10.0.0.0/24", -2)"#, "10.0.0.254"),
            (r#"element(["a", "b"], 3)"#, "b"),
            (r#"lookup({a = "x"}, "b", "d")"#, "d"),
            (r#"coalesce("", "y")"#, "y"),
            (r#"nonsensitive(sensitive("s"))"#, "s"),
            (r#"format("%#v", ["a", "b"])"#, r#"["a","b"]"#),
            (r#"base64decode(base64encode("talos"))"#, "talos"),
            (r#"base64encode("hi")"#, "aGk="),
            (r#"cidrhost("10.1.1.0/24", "5" + "1")"#, "10.1.1.6"),
            (
                r#""ip=${cidrhost("10.1.1.0/24", "5" + "${1 + 1}")}/24,gw=\"x\"""#,
                "ip=10.1.1.7/24,gw=\"x\"",
            ),
            (r#"indent(2, "a\nb\n")"#, "a\n  b\n  "),
            (r#"replace("a-b", "-", "_")"#, "a_b"),
            (r#"tostring(length(concat([1], [2, 3])))"#, "3"),
            (r#"cidrsubnet("10.0.0.0/16", 8, 2)"#, "10.0.2.0/24"),
            (r#"tostring(sum([1, 2]) + index(["a", "b"], "b"))"#, "4"),
            (r#"try(local.nodes.missing.host, "fallback")"#, "fallback"),
            (r#"try(local.nodes["cp1"].host, "fallback")"#, "pve1"),
            (r#"try(lower("A"), "fallback")"#, "a"),
            (
                r#"{ for i, n in ["w9"] : n => { t = coalesce(try(local.nodes[n].host, null), "d") } }["w9"].t"#,
                "d",
            ),
        ] {
            assert_eq!(eval(expr, &n).unwrap().as_str(), Some(want), "{expr}");
        }
        let keys = eval("keys(merge(local.nodes, {x = 1}))", &n).unwrap();
        assert_eq!(keys.as_seq().map(<[Node]>::len), Some(3));
        assert_eq!(
            eval("range(3)", &n).unwrap().as_seq().map(<[Node]>::len),
            Some(3)
        );
    }

    #[test]
    fn try_falls_back_when_a_function_fails_on_known_values_but_not_on_an_unknown() {
        let n = names();
        assert_eq!(
            eval(
                r#"try(coalesce(try(var.nope.x, null), ""), "fallback")"#,
                &n
            )
            .unwrap()
            .as_str(),
            Some("fallback")
        );
        assert_eq!(
            eval(r#"try(coalesce("", var.cluster), "fallback")"#, &n)
                .unwrap()
                .as_str(),
            Some("prod")
        );
        let err = eval(
            r#"try(coalesce(proxmox_virtual_environment_vm.cp.name, ""), "fallback")"#,
            &n,
        )
        .unwrap_err();
        assert!(err.contains("after `terraform apply`"), "{err}");
    }

    #[test]
    fn a_fallback_of_try_is_evaluated_only_when_the_first_argument_fails() {
        let n = names();
        // `error` is no function of Terraform's: reaching it would be an error.
        for (expr, want) in [
            (
                r#"try(local.nodes["cp1"].host, error("no defaults"))"#,
                "pve1",
            ),
            (r#"try(lower("A"), error("no"))"#, "a"),
            (
                r#"try(local.nodes.missing.host, local.nodes.gone, "last")"#,
                "last",
            ),
        ] {
            assert_eq!(eval(expr, &n).unwrap().as_str(), Some(want), "{expr}");
        }
        let err = eval(r#"try(local.nodes.missing.host, error("no defaults"))"#, &n).unwrap_err();
        assert!(err.contains("error"), "{err}");
    }

    #[test]
    fn a_value_known_only_after_apply_is_an_error_saying_so() {
        let err = eval("proxmox_virtual_environment_vm.cp.ipv4_addresses", &names()).unwrap_err();
        assert!(
            err.contains("proxmox_virtual_environment_vm")
                && err.contains("after `terraform apply`"),
            "{err}"
        );
        let err = eval(r#"regex("a", "b")"#, &names()).unwrap_err();
        assert!(err.contains("regex"), "{err}");
    }
}
