//! YAML with positions. Manifests, Kustomizations, Helm values and Talos patches are read into
//! [`Node`]s that keep the line each value was written on, because evidence must name the
//! file and line that set a value, and serde's YAML deserializers forget positions.
//!
//! The events come from granit-parser (a YAML 1.2 parser, the one serde-saphyr reads with and
//! re-exports); this module only builds the tree.

use std::collections::BTreeMap;

use serde_saphyr::granit_parser::{
    Event, Options, Parser, ScalarStyle, Span, SpannedEventReceiver,
};

use super::site::{RepoError, Site};

/// One YAML value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub site: Site,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    /// The text, and whether it was plain (unquoted), so `true` and `2` can be read as a
    /// bool and a number while `"2"` stays a string.
    Scalar(String, bool),
    Seq(Vec<Node>),
    /// In the order written; keys are unique (a duplicate is a parse error).
    Map(Vec<(String, Node)>),
}

impl Node {
    pub fn new(value: Value, site: Site) -> Node {
        Node { value, site }
    }

    pub fn str(text: impl Into<String>, site: Site) -> Node {
        Node::new(Value::Scalar(text.into(), false), site)
    }

    /// The value at a path of map keys, e.g. `["spec", "values"]`.
    pub fn get(&self, path: &[&str]) -> Option<&Node> {
        let mut node = self;
        for key in path {
            node = node.entry(key)?;
        }
        Some(node)
    }

    pub fn entry(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn entry_mut(&mut self, key: &str) -> Option<&mut Node> {
        match &mut self.value {
            Value::Map(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A scalar's text (strings, numbers and bools alike).
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(text, _) => Some(text),
            _ => None,
        }
    }

    pub fn get_str(&self, path: &[&str]) -> Option<&str> {
        self.get(path).and_then(Node::as_str)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match &self.value {
            Value::Scalar(text, true) => match text.as_str() {
                "true" | "True" | "TRUE" => Some(true),
                "false" | "False" | "FALSE" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// A plain integer, read as Kustomize's YAML library reads it (see [`plain_number`]):
    /// `0775` is octal, `0x1F` hexadecimal, `1_000` a thousand.
    pub fn as_i64(&self) -> Option<i64> {
        match &self.value {
            Value::Scalar(text, true) => match plain_number(text)? {
                Number::Int(n) => Some(n),
                Number::Uint(_) | Number::Float(_) => None,
            },
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(String, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Null)
    }

    /// A map of strings (labels, selectors), or `None` when it is not one.
    pub fn string_map(&self) -> Option<BTreeMap<String, String>> {
        self.as_map()?
            .iter()
            .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect()
    }

    /// The value as JSON, for deserializing into Kubernetes types; positions are dropped.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Scalar(text, plain) => {
                if *plain {
                    if let Some(b) = self.as_bool() {
                        return serde_json::Value::Bool(b);
                    }
                    match plain_number(text) {
                        Some(Number::Int(n)) => return serde_json::Value::from(n),
                        Some(Number::Uint(n)) => return serde_json::Value::from(n),
                        // Go's JSON, which Kustomize and the API machinery write objects
                        // with, writes a whole float as an integer (`1e3` is `1000`).
                        Some(Number::Float(f)) if f.fract() == 0.0 && f.abs() < 9.2e18 => {
                            return serde_json::Value::from(f as i64);
                        }
                        Some(Number::Float(f)) => return serde_json::Value::from(f),
                        None => {}
                    }
                    if text == "~" || text == "null" {
                        return serde_json::Value::Null;
                    }
                }
                serde_json::Value::String(text.clone())
            }
            Value::Seq(items) => {
                serde_json::Value::Array(items.iter().map(Node::to_json).collect())
            }
            Value::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// A short rendering for evidence: scalars as written, collections in flow style.
    pub fn show(&self) -> String {
        match &self.value {
            Value::Null => "null".to_string(),
            Value::Scalar(text, _) => text.clone(),
            Value::Seq(items) => format!(
                "[{}]",
                items.iter().map(Node::show).collect::<Vec<_>>().join(", ")
            ),
            Value::Map(entries) => format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", v.show()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// A plain scalar's number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i64),
    /// Above `i64::MAX`.
    Uint(u64),
    Float(f64),
}

/// A plain scalar read as a number the way go-yaml v3 (`resolve`, which Kustomize's kyaml and
/// so Flux and `kubectl kustomize` use) reads it: text starting with a digit or a sign loses
/// its underscores and is an integer if Go's `strconv.ParseInt(text, 0, 64)` (or `ParseUint`)
/// takes it, with its `0x`, `0o`, `0b` and leading-`0` octal prefixes; otherwise, like text
/// starting with `.`, a float if it matches `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
/// `inf`, `nan` and `Infinity` are strings (go-yaml's `.inf` and `.nan` are left to the
/// caller: JSON has no such numbers). YAML 1.1 timestamps are not converted.
pub fn plain_number(text: &str) -> Option<Number> {
    let first = text.chars().next()?;
    if first == '.' {
        return yaml_float(text).map(Number::Float);
    }
    if !(first.is_ascii_digit() || first == '+' || first == '-') {
        return None;
    }
    let plain: String = text.chars().filter(|c| *c != '_').collect();
    if let Some(number) = go_integer(&plain) {
        return Some(number);
    }
    yaml_float(&plain).map(Number::Float)
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)` (no sign) for larger values.
fn go_integer(text: &str) -> Option<Number> {
    let (negative, unsigned) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = unsigned.to_ascii_lowercase();
    let (radix, digits) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        return 0i64.checked_sub_unsigned(magnitude).map(Number::Int);
    }
    match i64::try_from(magnitude) {
        Ok(n) => Some(Number::Int(n)),
        // ParseUint refuses a sign.
        Err(_) if !text.starts_with('+') => Some(Number::Uint(magnitude)),
        Err(_) => None,
    }
}

/// go-yaml's `yamlStyleFloat`, then Go's `ParseFloat`.
fn yaml_float(text: &str) -> Option<f64> {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", fraction)) => digits(fraction),
        Some((whole, fraction)) => digits(whole) && fraction.chars().all(|c| c.is_ascii_digit()),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    if !(mantissa_ok && exponent_ok) {
        return None;
    }
    text.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Every document of a YAML stream (empty documents left out). `file` is the
/// repository-relative name used in sites and errors.
pub fn parse(file: &str, text: &str) -> Result<Vec<Node>, RepoError> {
    parse_shifted(file, text, 0)
}

/// Like [`parse`], for YAML embedded in a block scalar of another file (Helm values in a
/// ConfigMap): `shift` is added to every line so sites point into the outer file.
pub fn parse_shifted(file: &str, text: &str, shift: usize) -> Result<Vec<Node>, RepoError> {
    build(file, text, shift, false)
}

/// Like [`parse`], for a manifest Kustomize reads: Kustomize (kubectl 1.32's, checked with
/// `kubectl kustomize`) accepts a key written twice in one mapping when both values are
/// mappings, merging them with the first value winning where both set a key, and refuses
/// any other duplicate. Other files keep every duplicate an error.
pub fn parse_manifest(file: &str, text: &str) -> Result<Vec<Node>, RepoError> {
    build(file, text, 0, true)
}

fn build(file: &str, text: &str, shift: usize, merge_maps: bool) -> Result<Vec<Node>, RepoError> {
    let mut builder = Builder {
        merge_maps,
        file,
        shift,
        stack: Vec::new(),
        documents: Vec::new(),
        anchors: BTreeMap::new(),
        error: None,
    };
    let mut parser = Parser::new_from_str_with_options(text, parser_options());
    if let Err(err) = parser.load(&mut builder, true) {
        let line = err.marker().line() + shift;
        return Err(RepoError::new(
            Site::new(file, line),
            format!("malformed YAML: {}", err.info()),
        ));
    }
    if let Some(error) = builder.error {
        return Err(error);
    }
    Ok(builder
        .documents
        .into_iter()
        .filter(|d| !d.is_null())
        .collect())
}

/// Merge `later` into `first`: keys `first` lacks are added; where both are mappings they
/// merge again; otherwise `first` keeps its value.
fn merge_first_wins(first: &mut Node, later: Node) {
    let (Value::Map(entries), Value::Map(more)) = (&mut first.value, later.value) else {
        return;
    };
    for (key, value) in more {
        match entries.iter_mut().find(|(k, _)| *k == key) {
            None => entries.push((key, value)),
            Some((_, existing)) if existing.as_map().is_some() && value.as_map().is_some() => {
                merge_first_wins(existing, value)
            }
            Some(_) => {}
        }
    }
}

/// A plain `<<` key (or one tagged `!!merge`) while its mapping is built: a YAML merge key,
/// resolved when the mapping ends (a quoted `"<<"` is an ordinary key).
const MERGE_KEY: &str = "\u{0}<<";

/// Resolve a mapping's merge key as go-yaml (Kustomize's kyaml, Helm) does, after YAML 1.1's
/// merge key type: the keys of the aliased mapping, or of each mapping of a list with the
/// first winning, that the mapping does not set itself; the merged values keep the lines of
/// the anchored mapping.
fn merge_keys(map: &mut Node) -> Result<(), RepoError> {
    let Value::Map(entries) = &mut map.value else {
        return Ok(());
    };
    let Some(index) = entries.iter().position(|(k, _)| k == MERGE_KEY) else {
        return Ok(());
    };
    let (_, merged) = entries.remove(index);
    let sources: Vec<Node> = match merged.value {
        Value::Map(_) => vec![merged],
        Value::Seq(items) if items.iter().all(|i| i.as_map().is_some()) => items,
        _ => {
            return Err(RepoError::new(
                merged.site,
                "a merge key `<<` takes a mapping or a list of mappings",
            ));
        }
    };
    for source in sources {
        if let Value::Map(more) = source.value {
            for (key, value) in more {
                if !entries.iter().any(|(k, _)| *k == key) {
                    entries.push((key, value));
                }
            }
        }
    }
    Ok(())
}

/// The parser's options: its defaults, except that a block scalar running to the end of a
/// source without a final line break gets no final break. By default granit-parser, like the
/// YAML test suite (`L24T`), reads that last line as if it ended with a break; libyaml and
/// go-yaml (Kustomize, `kubectl`) keep only the breaks that are there, so `|` at the very end
/// of a file gives no final break.
fn parser_options() -> Options {
    let mut options = Options::default();
    options.block_scalar_eof_without_line_feed = true;
    options
}

enum Frame {
    Seq(Node, usize),
    /// The map so far, its anchor, and a key waiting for its value.
    Map(Node, usize, Option<(String, Site)>),
}

struct Builder<'a> {
    /// Merge a duplicate key's mapping into the first (see [`parse_manifest`]).
    merge_maps: bool,
    file: &'a str,
    shift: usize,
    stack: Vec<Frame>,
    documents: Vec<Node>,
    anchors: BTreeMap<usize, Node>,
    error: Option<RepoError>,
}

impl Builder<'_> {
    fn site(&self, span: &Span) -> Site {
        Site::new(self.file, span.start.line() + self.shift)
    }

    /// Attach a finished value to its parent (or finish a document).
    fn push(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.documents.push(node),
            Some(Frame::Seq(seq, _)) => {
                if let Value::Seq(items) = &mut seq.value {
                    items.push(node);
                }
            }
            Some(Frame::Map(map, _, pending)) => match pending.take() {
                None => {
                    let key = match &node.value {
                        Value::Scalar(text, true) if text == "<<" => MERGE_KEY.to_string(),
                        Value::Scalar(text, _) => text.clone(),
                        Value::Null => "null".to_string(),
                        Value::Seq(_) | Value::Map(_) => {
                            self.fail(node.site.clone(), "a mapping key must be a scalar");
                            return;
                        }
                    };
                    let duplicate = map
                        .as_map()
                        .is_some_and(|entries| entries.iter().any(|(k, _)| *k == key));
                    if duplicate && !self.merge_maps {
                        self.fail(node.site.clone(), format!("duplicate key `{key}`"));
                        return;
                    }
                    *pending = Some((key, node.site));
                }
                Some((key, key_site)) => {
                    // A collection under a key is where the key is written.
                    let mut node = node;
                    if matches!(node.value, Value::Seq(_) | Value::Map(_)) {
                        node.site = key_site.clone();
                    }
                    if let Value::Map(entries) = &mut map.value {
                        match entries.iter_mut().find(|(k, _)| *k == key) {
                            None => entries.push((key, node)),
                            Some((_, first)) => {
                                if first.as_map().is_some() && node.as_map().is_some() {
                                    merge_first_wins(first, node);
                                } else {
                                    self.fail(key_site, format!("duplicate key `{key}`"));
                                }
                            }
                        }
                    }
                }
            },
        }
    }

    fn fail(&mut self, site: Site, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(RepoError::new(site, message));
        }
    }
}

impl<'input> SpannedEventReceiver<'input> for Builder<'_> {
    fn on_event(&mut self, event: Event<'input>, span: Span) {
        if self.error.is_some() {
            return;
        }
        let site = self.site(&span);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                // A merge key may carry its type explicitly: `!!merge <<`.
                let merge = text == "<<"
                    && matches!(style, ScalarStyle::Plain)
                    && tag.as_ref().is_some_and(|t| {
                        t.suffix() == "merge" && matches!(t.handle(), "!!" | "tag:yaml.org,2002:")
                    });
                let plain = matches!(style, ScalarStyle::Plain) && tag.is_none() || merge;
                // A block scalar is marked where its content starts; its place is the line of
                // its `|` or `>` indicator, so embedded YAML's line k is that line plus k.
                let site = match style {
                    ScalarStyle::Literal | ScalarStyle::Folded => {
                        Site::new(self.file, site.line.saturating_sub(1).max(1))
                    }
                    _ => site,
                };
                let text = text.into_owned();
                let value = if plain && matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL")
                {
                    Value::Null
                } else {
                    Value::Scalar(text, plain)
                };
                self.push(Node::new(value, site), anchor);
            }
            Event::SequenceStart(_, anchor, _) => self
                .stack
                .push(Frame::Seq(Node::new(Value::Seq(Vec::new()), site), anchor)),
            Event::MappingStart(_, anchor, _) => self.stack.push(Frame::Map(
                Node::new(Value::Map(Vec::new()), site),
                anchor,
                None,
            )),
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Seq(node, anchor)) => self.push(node, anchor),
                Some(Frame::Map(mut node, anchor, _)) => {
                    if let Err(error) = merge_keys(&mut node) {
                        self.fail(error.site.clone(), error.message);
                    }
                    self.push(node, anchor)
                }
                None => self.fail(site, "unbalanced YAML collection"),
            },
            Event::Alias(anchor) => match self.anchors.get(&anchor).cloned() {
                Some(node) => self.push(node, 0),
                None => self.fail(site, "alias to an unknown anchor"),
            },
            // Stream and document boundaries, comments, and (not asked for) anchor names and
            // unresolved aliases carry no value.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_the_line_they_were_written_on() {
        let docs = parse(
            "a.yaml",
            "kind: HelmRelease\nspec:\n  values:\n    service:\n      spec:\n        externalTrafficPolicy: Local\n---\nkind: ConfigMap\n",
        )
        .unwrap();
        assert_eq!(docs.len(), 2);
        let policy = docs[0]
            .get(&["spec", "values", "service", "spec", "externalTrafficPolicy"])
            .unwrap();
        assert_eq!(policy.as_str(), Some("Local"));
        assert_eq!(policy.site.to_string(), "a.yaml:6");
        assert_eq!(docs[1].get_str(&["kind"]), Some("ConfigMap"));
        assert_eq!(docs[1].get(&["kind"]).unwrap().site.line, 8);
    }

    #[test]
    fn plain_scalars_read_as_bools_and_numbers_but_quoted_ones_stay_strings() {
        let doc = &parse("a.yaml", "a: true\nb: \"true\"\nc: 2\nd: '2'\ne: ~\n").unwrap()[0];
        assert_eq!(doc.entry("a").unwrap().as_bool(), Some(true));
        assert_eq!(doc.entry("b").unwrap().as_bool(), None);
        assert_eq!(doc.entry("c").unwrap().as_i64(), Some(2));
        assert_eq!(doc.entry("d").unwrap().as_i64(), None);
        assert!(doc.entry("e").unwrap().is_null());
        assert_eq!(doc.to_json()["c"], serde_json::json!(2));
    }

    #[test]
    fn plain_numbers_are_typed_as_kustomizes_yaml_library_types_them() {
        let doc = &parse(
            "a.yaml",
            "octal: 0775\nnew: 0o17\nhex: -0x1F\nbin: 0B11\nunder: 1_000\neight: 08\n\
             float: 1e3\nhalf: .5\nwhole: 5.\nbig: 18446744073709551615\n\
             words: [inf, nan, Infinity, .inf, 1.2.3, '12']\n",
        )
        .unwrap()[0];
        let json = doc.to_json();
        assert_eq!(json["octal"], serde_json::json!(509));
        assert_eq!(json["new"], serde_json::json!(15));
        assert_eq!(json["hex"], serde_json::json!(-31));
        assert_eq!(json["bin"], serde_json::json!(3));
        assert_eq!(json["under"], serde_json::json!(1000));
        // Not octal, so a float, written by Go's JSON as the integer 8.
        assert_eq!(json["eight"], serde_json::json!(8));
        assert_eq!(json["float"], serde_json::json!(1000));
        assert_eq!(json["half"], serde_json::json!(0.5));
        assert_eq!(json["whole"], serde_json::json!(5));
        assert_eq!(json["big"], serde_json::json!(u64::MAX));
        assert_eq!(
            json["words"],
            serde_json::json!(["inf", "nan", "Infinity", ".inf", "1.2.3", "12"])
        );
        assert_eq!(doc.entry("octal").unwrap().as_i64(), Some(509));
        assert_eq!(doc.entry("float").unwrap().as_i64(), None);
    }

    #[test]
    fn merge_keys_bring_in_the_keys_a_mapping_does_not_set_the_first_source_winning() {
        let doc = &parse(
            "a.yaml",
            "base: &base {a: 1, b: 1}\nmore: &more {b: 2, c: 2}\n\
             one: {<<: *base, a: 9}\nlist:\n  a: 9\n  <<: [*base, *more]\n\
             quoted: {\"<<\": x}\ntagged:\n  !!merge <<: *more\n",
        )
        .unwrap()[0];
        let json = doc.to_json();
        assert_eq!(json["one"], serde_json::json!({"a": 9, "b": 1}));
        assert_eq!(json["list"], serde_json::json!({"a": 9, "b": 1, "c": 2}));
        assert_eq!(json["quoted"], serde_json::json!({"<<": "x"}));
        assert_eq!(json["tagged"], serde_json::json!({"b": 2, "c": 2}));
        // A merged value keeps the line of the anchored mapping.
        assert_eq!(doc.get(&["list", "c"]).unwrap().site.line, 2);
        let err = parse("b.yaml", "a: {<<: 1}\n").unwrap_err();
        assert!(
            err.to_string().starts_with("b.yaml:1: a merge key"),
            "{err}"
        );
    }

    #[test]
    fn a_block_scalar_ending_the_file_without_a_line_break_has_no_final_break() {
        let value = |text: &str, key: &str| {
            parse("a.yaml", text).unwrap()[0]
                .entry(key)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(value("a: |\n  x\n  y", "a"), "x\ny");
        assert_eq!(value("a: |+\n  x", "a"), "x");
        assert_eq!(value("a: >\n  x\n  y", "a"), "x y");
        assert_eq!(value("a: |\n  x\n", "a"), "x\n");
        // A block scalar before other keys, or before a comment that ends it, keeps its break.
        assert_eq!(value("a: |\n  x\nb: 1", "a"), "x\n");
        assert_eq!(value("a: |\n  x\n# end", "a"), "x\n");
    }

    #[test]
    fn an_empty_value_is_placed_on_its_keys_line_not_at_the_next_token() {
        // yaml-rust2, the parser before granit-parser, placed it where the next key starts.
        let doc = &parse("a.yaml", "metadata:\n# a comment\n\nspec:\n  x: |\n").unwrap()[0];
        assert_eq!(doc.entry("metadata").unwrap().site.line, 1);
        assert!(doc.entry("metadata").unwrap().is_null());
        assert_eq!(doc.get_str(&["spec", "x"]), Some(""));
    }

    #[test]
    fn embedded_yaml_is_placed_in_the_outer_file() {
        let doc = &parse_shifted("cm.yaml", "service:\n  type: LoadBalancer\n", 7).unwrap()[0];
        assert_eq!(doc.get(&["service", "type"]).unwrap().site.line, 9);
    }

    #[test]
    fn malformed_yaml_is_an_error_naming_the_file_and_line() {
        let err = parse("bad.yaml", "a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert_eq!(err.site.file, "bad.yaml");
        assert!(err.site.line >= 2, "{err}");
        assert!(err.message.contains("malformed YAML"), "{err}");
        let err = parse("tab.yaml", "a:\n\tb: 1\n").unwrap_err();
        assert!(err.to_string().starts_with("tab.yaml:2"), "{err}");
    }

    #[test]
    fn a_manifest_merges_a_mapping_written_twice_as_kustomize_does_and_refuses_other_duplicates() {
        let text =
            "metadata:\n  annotations:\n    a: '1'\n  annotations:\n    a: '2'\n    b: '3'\n";
        let doc = parse_manifest("m.yaml", text).unwrap().remove(0);
        let annotations = doc.get(&["metadata", "annotations"]).unwrap();
        assert_eq!(annotations.get_str(&["a"]), Some("1"));
        assert_eq!(
            annotations.get(&["b"]).unwrap().site.to_string(),
            "m.yaml:6"
        );
        let err = parse_manifest("m.yaml", "metadata:\n  name: x\n  name: y\n").unwrap_err();
        assert_eq!(err.to_string(), "m.yaml:3: duplicate key `name`");
        assert!(
            parse("m.yaml", text).is_err(),
            "other files keep duplicates errors"
        );
    }

    #[test]
    fn duplicate_keys_and_unknown_aliases_are_errors_not_last_one_wins() {
        let err = parse("dup.yaml", "a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.to_string(), "dup.yaml:3: duplicate key `a`");
        assert!(parse("alias.yaml", "a: *nowhere\n").is_err());
    }

    #[test]
    fn anchors_and_aliases_copy_the_anchored_value() {
        let doc = &parse("a.yaml", "base: &b {x: 1}\ncopy: *b\n").unwrap()[0];
        assert_eq!(doc.get_str(&["copy", "x"]), Some("1"));
    }

    #[test]
    fn every_prefix_of_a_real_manifest_parses_or_errors_without_panicking() {
        let text = include_str!(
            "../../../fixtures/repo/staging-today/kubernetes/infrastructure/controllers/traefik/release.yaml"
        );
        for end in (0..text.len()).filter(|i| text.is_char_boundary(*i)) {
            if let Err(err) = parse("release.yaml", &text[..end]) {
                assert!(err.site.line >= 1 && err.site.line <= 90, "{err}");
            }
        }
        for garbage in [
            "\u{0}",
            "{",
            "[",
            "a: &x\n  b: *x\n  c: *y",
            "? [a]\n: b",
            "- - - -",
            "\t",
        ] {
            let _ = parse("x.yaml", garbage);
        }
    }
}
