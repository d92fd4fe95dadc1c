//! A values file for gates's Helm chart, judged against the chart's schema
//! (`deploy/helm/gates/values.schema.json`) the way Helm judges it at install, upgrade,
//! template and lint, but naming the file and line of each problem beside its key: Helm
//! reads values into a map and knows a value's path, never the line it came from.
//!
//! The values are typed as Helm reads them (`sigs.k8s.io/yaml`, which types through go-yaml
//! v2: YAML 1.1's `yes`, `no`, `on`, `off`, `y` and `n` are booleans, and a plain number is a
//! number as go-yaml reads it), and a key set to null where the chart's own values have it is
//! left out, as Helm's coalescing drops it ("drop the chart's default"); a null anywhere else
//! stays, and is judged. Only the schema keywords the chart's schema uses are known;
//! a schema using another is refused, not half-applied (a test holds the shipped schema to
//! them).

use serde_json::Value as Json;

use crate::declared::site::{RepoError, Site};
use crate::declared::yaml::{Node, Number, Value, parse, plain_number};

/// One value the schema refuses: where it was written, its path, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub site: Site,
    /// The value's path, dotted (`secretMounts[0].mountPath`).
    pub key: String,
    /// Why, as Helm's validator says it (`got string, want integer`).
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.site, self.key, self.message)
    }
}

/// The keywords this judge applies; any other in a schema is refused.
const KNOWN: &[&str] = &[
    "$schema",
    "$ref",
    "title",
    "description",
    "definitions",
    "type",
    "properties",
    "additionalProperties",
    "required",
    "items",
    "enum",
    "minLength",
    "pattern",
    "minimum",
    "maximum",
];

/// Every problem of the values file `file` (its text `text`) under `schema`, over the chart's
/// own values `defaults`, in the order written; an error when the file is not YAML or the
/// schema uses a keyword not known here.
pub fn check(
    file: &str,
    text: &str,
    schema: &Json,
    defaults: &Json,
) -> Result<Vec<Problem>, RepoError> {
    unknown_keywords(schema).map_err(|keyword| {
        RepoError::new(
            Site::new(file, 0),
            format!("the chart's schema uses `{keyword}`, which gates does not judge"),
        )
    })?;
    let documents = parse(file, text)?;
    let mut problems = Vec::new();
    if let Some(second) = documents.get(1) {
        problems.push(Problem {
            site: second.site.clone(),
            key: "(document 2)".into(),
            message: "a second YAML document: Helm reads only the first".into(),
        });
    }
    let Some(values) = documents.first() else {
        return Ok(problems);
    };
    if values.as_map().is_none() && !values.is_null() {
        problems.push(Problem {
            site: values.site.clone(),
            key: "(top)".into(),
            message: format!("got {}, want object", type_of(values)),
        });
        return Ok(problems);
    }
    let mut judge = Judge {
        root: schema,
        problems,
    };
    judge.node(values, schema, Some(defaults), &mut Vec::new());
    Ok(judge.problems)
}

/// A values file as Helm holds it (the chart's own, for [`check`]'s `defaults`).
pub fn values(file: &str, text: &str) -> Result<Json, RepoError> {
    Ok(parse(file, text)?
        .first()
        .map_or(Json::Object(Default::default()), helm_json))
}

/// The first keyword of `schema` (or of a schema inside it) not in [`KNOWN`].
fn unknown_keywords(schema: &Json) -> Result<(), String> {
    let Json::Object(map) = schema else {
        return Ok(());
    };
    for (keyword, inner) in map {
        if !KNOWN.contains(&keyword.as_str()) {
            return Err(keyword.clone());
        }
        match keyword.as_str() {
            "properties" | "definitions" => {
                if let Json::Object(schemas) = inner {
                    for schema in schemas.values() {
                        unknown_keywords(schema)?;
                    }
                }
            }
            "items" | "additionalProperties" => unknown_keywords(inner)?,
            _ => {}
        }
    }
    Ok(())
}

struct Judge<'s> {
    root: &'s Json,
    problems: Vec<Problem>,
}

/// A step of a value's path.
enum Step {
    Key(String),
    Index(usize),
}

fn dotted(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) if out.is_empty() => out.push_str(key),
            Step::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() { "(top)".into() } else { out }
}

impl<'s> Judge<'s> {
    fn refuse(&mut self, node: &Node, path: &[Step], message: String) {
        self.problems.push(Problem {
            site: node.site.clone(),
            key: dotted(path),
            message,
        });
    }

    /// `schema` with its `$ref` followed (draft 7: a `$ref` replaces its siblings).
    fn resolved(&self, schema: &'s Json) -> &'s Json {
        let mut schema = schema;
        // A chain of references, bounded: a reference to itself is no schema.
        for _ in 0..16 {
            match schema
                .get("$ref")
                .and_then(Json::as_str)
                .and_then(|r| r.strip_prefix("#/definitions/"))
            {
                Some(name) => match self.root.pointer(&format!("/definitions/{name}")) {
                    Some(target) => schema = target,
                    None => return &Json::Null,
                },
                None => return schema,
            }
        }
        &Json::Null
    }

    /// Judge `node` under `schema`; `default` is the chart's own value at its path, if the
    /// chart has one.
    fn node(
        &mut self,
        node: &Node,
        schema: &'s Json,
        default: Option<&Json>,
        path: &mut Vec<Step>,
    ) {
        let schema = self.resolved(schema);
        if node.is_null() && default.is_some_and(|d| !d.is_null()) {
            // Null drops the chart's default: Helm validates the values without the key.
            return;
        }
        let have = type_of(node);
        if let Some(want) = schema.get("type") {
            let wanted: Vec<&str> = match want {
                Json::String(one) => vec![one.as_str()],
                Json::Array(many) => many.iter().filter_map(Json::as_str).collect(),
                _ => Vec::new(),
            };
            if !wanted.iter().any(|w| fits(node, have, w)) {
                let mut wanted = wanted;
                wanted.sort_unstable();
                let message = format!("got {have}, want {}", wanted.join(" or "));
                self.refuse(node, path, message);
                return;
            }
        }
        if let Some(Json::Array(allowed)) = schema.get("enum") {
            let value = helm_json(node);
            if !allowed.contains(&value) {
                let listed: Vec<String> = allowed.iter().map(shown).collect();
                self.refuse(
                    node,
                    path,
                    format!("value must be one of {}", listed.join(", ")),
                );
            }
        }
        match &node.value {
            Value::Scalar(..) => self.scalar(node, schema, path),
            Value::Seq(items) => {
                if let Some(each) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        path.push(Step::Index(i));
                        // A list replaces the chart's whole: its items have no defaults.
                        self.node(item, each, None, path);
                        path.pop();
                    }
                }
            }
            Value::Map(entries) => self.object(node, entries, schema, default, path),
            Value::Null => {}
        }
    }

    fn scalar(&mut self, node: &Node, schema: &Json, path: &[Step]) {
        match helm_json(node) {
            Json::String(text) => {
                if let Some(least) = schema.get("minLength").and_then(Json::as_u64) {
                    let length = text.chars().count() as u64;
                    if length < least {
                        self.refuse(node, path, format!("minLength: got {length}, want {least}"));
                    }
                }
                if let Some(pattern) = schema.get("pattern").and_then(Json::as_str) {
                    match regex::Regex::new(pattern) {
                        Ok(re) if re.is_match(&text) => {}
                        Ok(_) => self.refuse(
                            node,
                            path,
                            format!("'{text}' does not match pattern '{pattern}'"),
                        ),
                        Err(err) => self.refuse(
                            node,
                            path,
                            format!("the schema's pattern '{pattern}' is not read: {err}"),
                        ),
                    }
                }
            }
            Json::Number(n) => {
                let n = n.as_f64().unwrap_or(f64::NAN);
                if let Some(least) = schema.get("minimum").and_then(Json::as_f64)
                    && n < least
                {
                    let (n, least) = (grouped(n), grouped(least));
                    self.refuse(node, path, format!("minimum: got {n}, want {least}"));
                }
                if let Some(most) = schema.get("maximum").and_then(Json::as_f64)
                    && n > most
                {
                    let (n, most) = (grouped(n), grouped(most));
                    self.refuse(node, path, format!("maximum: got {n}, want {most}"));
                }
            }
            _ => {}
        }
    }

    fn object(
        &mut self,
        node: &Node,
        entries: &[(String, Node)],
        schema: &'s Json,
        default: Option<&Json>,
        path: &mut Vec<Step>,
    ) {
        let properties = schema.get("properties").and_then(Json::as_object);
        let default_of = |key: &str| default.and_then(|d| d.get(key));
        // Helm's coalescing drops a null over any key of the chart's at the top, and below it
        // only over a value that is not null itself (`coalesce.go`).
        let top = path.is_empty();
        let drops = |default: Option<&Json>| match default {
            Some(Json::Null) => top,
            Some(_) => true,
            None => false,
        };
        for (key, value) in entries {
            path.push(Step::Key(key.clone()));
            let default = default_of(key);
            let dropped = value.is_null() && drops(default);
            match (
                properties.and_then(|p| p.get(key)),
                schema.get("additionalProperties"),
            ) {
                _ if dropped => {}
                (Some(inner), _) => self.node(value, inner, default, path),
                (None, Some(Json::Bool(false))) => {
                    self.refuse(
                        value,
                        path,
                        format!("additional property '{key}' not allowed"),
                    );
                }
                (None, Some(inner @ Json::Object(_))) => self.node(value, inner, default, path),
                (None, _) => {}
            }
            path.pop();
        }
        if let Some(Json::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Json::as_str) {
                // What the chart sets stays unless the file drops it with a null.
                let set = match entries.iter().find(|(k, _)| k == name) {
                    Some((_, v)) => !(v.is_null() && drops(default_of(name))),
                    None => default_of(name).is_some(),
                };
                if !set {
                    self.refuse(node, path, format!("missing property '{name}'"));
                }
            }
        }
    }
}

/// Whether a value of JSON type `have` fits the schema type `want`: a number with no
/// fraction is an integer (draft 6 on).
fn fits(node: &Node, have: &str, want: &str) -> bool {
    match (have, want) {
        (have, want) if have == want => true,
        ("number", "integer") => helm_json(node).as_f64().is_some_and(|n| n.fract() == 0.0),
        _ => false,
    }
}

/// A value in a message as Helm's validator shows it: a string in single quotes.
fn shown(value: &Json) -> String {
    match value {
        Json::String(text) => format!("'{text}'"),
        other => other.to_string(),
    }
}

/// A number as Helm's validator prints it: a whole one with its thousands grouped (`70,000`).
fn grouped(n: f64) -> String {
    if n.fract() != 0.0 || n.abs() >= 1e15 {
        return n.to_string();
    }
    let digits = format!("{}", n.abs() as u64);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0.0 { format!("-{out}") } else { out }
}

/// The JSON type Helm's validator sees for `node`: Helm holds every number as a float, so
/// a number is a `number` (and fits `integer` when whole).
fn type_of(node: &Node) -> &'static str {
    match &node.value {
        Value::Null => "null",
        Value::Seq(_) => "array",
        Value::Map(_) => "object",
        Value::Scalar(..) => match helm_json(node) {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        },
    }
}

/// YAML 1.1's booleans and nulls as go-yaml v2 resolves a plain scalar (`resolve.go`,
/// `resolveMapList`).
const TRUE: &[&str] = &[
    "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
];
const FALSE: &[&str] = &[
    "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
];
const NULL: &[&str] = &["", "~", "null", "Null", "NULL"];

/// `node` as Helm holds it: a plain scalar typed as go-yaml v2 types it, anything quoted a
/// string.
pub fn helm_json(node: &Node) -> Json {
    match &node.value {
        Value::Null => Json::Null,
        Value::Scalar(text, true) => {
            let text = text.as_str();
            if TRUE.contains(&text) {
                Json::Bool(true)
            } else if FALSE.contains(&text) {
                Json::Bool(false)
            } else if NULL.contains(&text) {
                Json::Null
            } else {
                match plain_number(text) {
                    Some(Number::Int(n)) => Json::from(n),
                    Some(Number::Uint(n)) => Json::from(n),
                    Some(Number::Float(f)) => serde_json::Number::from_f64(f)
                        .map_or(Json::String(text.into()), Json::Number),
                    None => Json::String(text.into()),
                }
            }
        }
        Value::Scalar(text, false) => Json::String(text.clone()),
        Value::Seq(items) => Json::Array(items.iter().map(helm_json).collect()),
        Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), helm_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Json {
        json!({
            "type": "object",
            "additionalProperties": false,
            "definitions": {"duration": {"type": "string", "pattern": "^[0-9]+[smh]$"}},
            "properties": {
                "schedule": {"type": "string", "minLength": 1},
                "pullPolicy": {"enum": ["Always", "Never"]},
                "watch": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "enabled": {"type": "boolean"},
                        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "interval": {"$ref": "#/definitions/duration"}
                    }
                },
                "mounts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "path"],
                        "properties": {"name": {"type": "string"}, "path": {"type": "string"}}
                    }
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        })
    }

    /// The chart's own values: a schedule, and a watch with a port.
    fn defaults() -> Json {
        json!({"schedule": "0 3 * * *", "watch": {"port": 9100}})
    }

    fn problems(text: &str) -> Vec<String> {
        check("values.yaml", text, &schema(), &defaults())
            .expect("read")
            .iter()
            .map(Problem::to_string)
            .collect()
    }

    #[test]
    fn every_refused_value_is_named_with_its_file_line_and_key_at_once() {
        let said = problems(
            "schedul: x\nschedule: \"\"\npullPolicy: Sometimes\nwatch:\n  enabled: maybe\n  port: 70000\n  interval: soon\nmounts:\n  - name: a\nlabels:\n  team: 7\n",
        );
        assert_eq!(
            said,
            [
                "values.yaml:1: schedul: additional property 'schedul' not allowed",
                "values.yaml:2: schedule: minLength: got 0, want 1",
                "values.yaml:3: pullPolicy: value must be one of 'Always', 'Never'",
                "values.yaml:5: watch.enabled: got string, want boolean",
                "values.yaml:6: watch.port: maximum: got 70,000, want 65,535",
                "values.yaml:7: watch.interval: 'soon' does not match pattern '^[0-9]+[smh]$'",
                "values.yaml:9: mounts[0]: missing property 'path'",
                "values.yaml:11: labels.team: got number, want string",
            ]
        );
    }

    #[test]
    fn values_are_typed_as_helm_types_them_and_null_drops_only_a_key_the_chart_has() {
        // YAML 1.1 booleans are booleans to Helm; a quoted one is a string; a whole float is
        // an integer; null leaves out a key the chart's values have (its default is dropped).
        assert!(problems("watch:\n  enabled: yes\n  port: 8080.0\nschedule: ~\n").is_empty());
        // A null the chart has no default for stays, and is judged (a required key set to
        // null is there, as null).
        assert_eq!(
            problems("watch:\n  enabled: null\nmounts:\n  - name: a\n    path: ~\nother: ~\n"),
            [
                "values.yaml:2: watch.enabled: got null, want boolean",
                "values.yaml:5: mounts[0].path: got null, want string",
                "values.yaml:6: other: additional property 'other' not allowed",
            ]
        );
        assert_eq!(
            problems("watch:\n  enabled: \"yes\"\n  port: \"8080\"\n"),
            [
                "values.yaml:2: watch.enabled: got string, want boolean",
                "values.yaml:3: watch.port: got string, want integer",
            ]
        );
        assert_eq!(
            problems("schedule: on\n"),
            ["values.yaml:1: schedule: got boolean, want string"]
        );
    }

    #[test]
    fn a_file_that_is_not_a_mapping_or_not_yaml_is_refused_at_its_line() {
        assert_eq!(
            problems("- a\n- b\n"),
            ["values.yaml:1: (top): got array, want object"]
        );
        assert!(problems("").is_empty());
        let err = check("values.yaml", "watch: [\n", &schema(), &defaults()).unwrap_err();
        assert!(err.to_string().starts_with("values.yaml:"), "{err}");
    }

    #[test]
    fn a_schema_keyword_gates_does_not_judge_is_refused_not_ignored() {
        let schema = json!({"properties": {"a": {"oneOf": [{"type": "string"}]}}});
        let err = check("values.yaml", "a: 1\n", &schema, &json!({})).unwrap_err();
        assert!(err.to_string().contains("`oneOf`"), "{err}");
    }
}
