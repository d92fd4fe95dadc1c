//! The YAML of a configuration file as a tree in which every node keeps its line and column,
//! parsed by serde-saphyr (`Spanned`). The loader deserializes the typed configuration from
//! this tree (see [`super::node_de`]), so an error points at the node that caused it, and
//! validation after loading asks the tree where a key is instead of searching the text.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// One YAML node and where it starts (1-based line and column).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub line: usize,
    pub column: usize,
    pub value: NodeValue,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    pub fn position(&self) -> (usize, usize) {
        (self.line, self.column)
    }

    /// The node at a path of keys (and list indices as numbers), e.g. `["proxmox", "url"]`.
    pub fn at(&self, path: &[&str]) -> Option<&Node> {
        let Some((first, rest)) = path.split_first() else {
            return Some(self);
        };
        let next = match &self.value {
            NodeValue::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_text().as_deref() == Some(*first))
                .map(|(_, v)| v),
            NodeValue::Seq(items) => first.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }?;
        next.at(rest)
    }

    /// The key node of `key` in this mapping.
    pub fn key(&self, key: &str) -> Option<&Node> {
        match &self.value {
            NodeValue::Map(entries) => entries
                .iter()
                .map(|(k, _)| k)
                .find(|k| k.as_text().as_deref() == Some(key)),
            _ => None,
        }
    }

    /// The first value in this mapping (or list) whose text is `word`.
    pub fn value_equal_to(&self, word: &str) -> Option<&Node> {
        let values: Vec<&Node> = match &self.value {
            NodeValue::Map(entries) => entries.iter().map(|(_, v)| v).collect(),
            NodeValue::Seq(items) => items.iter().collect(),
            _ => Vec::new(),
        };
        values
            .into_iter()
            .find(|v| v.as_text().as_deref() == Some(word))
    }

    /// A scalar as the text YAML would show (`None` for lists and mappings).
    pub fn as_text(&self) -> Option<String> {
        match &self.value {
            NodeValue::Null => Some(String::new()),
            NodeValue::Bool(b) => Some(b.to_string()),
            NodeValue::Int(i) => Some(i.to_string()),
            NodeValue::Uint(u) => Some(u.to_string()),
            NodeValue::Float(f) => Some(f.to_string()),
            NodeValue::Str(s) => Some(s.clone()),
            NodeValue::Seq(_) | NodeValue::Map(_) => None,
        }
    }
}

/// Parse a configuration file's text into its tree. An empty file is an empty mapping.
pub fn parse(text: &str) -> Result<Node, serde_saphyr::Error> {
    Ok(documents(text)?.into_iter().next().unwrap_or(Node {
        line: 1,
        column: 1,
        value: NodeValue::Map(Vec::new()),
    }))
}

/// Every YAML document of a text, as trees (none for an empty text or only comments).
pub fn documents(text: &str) -> Result<Vec<Node>, serde_saphyr::Error> {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    serde_saphyr::from_multiple_with_options(text, options)
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned: Spanned<NodeValue> = Spanned::deserialize(deserializer)?;
        Ok(Node {
            line: spanned.referenced.line() as usize,
            column: spanned.referenced.column() as usize,
            value: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = NodeValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeValue, D::Error> {
        NodeValue::deserialize(d)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<NodeValue, E> {
        Ok(NodeValue::Uint(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<NodeValue, E> {
        Ok(NodeValue::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(NodeValue::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeValue, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Node>()? {
            let value = map.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(NodeValue::Map(entries))
    }
}

/// Every line whose indentation holds a tab (1-based line and column of the tab): YAML
/// indents with spaces only, and parsers say so in words that do not mention the tab.
pub fn tabs_in_indentation(text: &str) -> Vec<(usize, usize)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let indent: &str = &line[..line.len() - line.trim_start().len()];
            indent.find('\t').map(|col| (i + 1, col + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_knows_its_line_and_column() {
        let tree =
            parse("nodes:\n  control_planes: 3\nchecks:\n  - kind: x\n    name: y\n").unwrap();
        let planes = tree.at(&["nodes", "control_planes"]).unwrap();
        assert_eq!(planes.position(), (2, 19));
        assert_eq!(planes.as_text().as_deref(), Some("3"));
        let name = tree.at(&["checks", "0", "name"]).unwrap();
        assert_eq!(name.position(), (5, 11));
        assert_eq!(
            tree.at(&["checks", "0"])
                .unwrap()
                .key("name")
                .unwrap()
                .position(),
            (5, 5)
        );
    }

    #[test]
    fn a_tab_in_the_indentation_is_found() {
        assert_eq!(tabs_in_indentation("a:\n\tb: 1\n  c: \"\t\"\n"), [(2, 1)]);
    }
}
