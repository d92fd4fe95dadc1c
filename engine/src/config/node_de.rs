//! Deserializing the typed configuration from a [`Node`] tree. Every error is tagged with
//! the innermost node that caused it (the unknown key itself, the value that is not a
//! duration, the mapping that lacks a key), and with its path in YAML words
//! (`checks[2].kind`), so no message has to be parsed back and no text searched.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};

use super::spans::{Node, NodeValue};

/// What went wrong, where, in YAML words.
#[derive(Debug, Clone, PartialEq)]
pub struct DeError {
    pub kind: DeErrorKind,
    /// 1-based line and column of the offending node.
    pub at: Option<(usize, usize)>,
    /// `nodes`, `checks[2]`: where the node sits ("" at the top).
    pub path: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DeErrorKind {
    UnknownKey {
        key: String,
        valid: Vec<&'static str>,
    },
    UnknownValue {
        value: String,
        valid: Vec<&'static str>,
    },
    MissingKey(&'static str),
    WrongType {
        found: String,
        wanted: String,
    },
    Other(String),
}

impl DeError {
    fn new(kind: DeErrorKind) -> Self {
        DeError {
            kind,
            at: None,
            path: String::new(),
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DeErrorKind::UnknownKey { key, .. } => write!(f, "unknown key `{key}`"),
            DeErrorKind::UnknownValue { value, .. } => write!(f, "unknown value `{value}`"),
            DeErrorKind::MissingKey(key) => write!(f, "missing key `{key}`"),
            DeErrorKind::WrongType { found, wanted } => {
                write!(f, "{found} where {wanted} is expected")
            }
            DeErrorKind::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError::new(DeErrorKind::Other(msg.to_string()))
    }

    fn invalid_type(unexp: de::Unexpected, exp: &dyn de::Expected) -> Self {
        DeError::new(DeErrorKind::WrongType {
            found: yaml_found(&unexp),
            wanted: yaml_wanted(&exp.to_string()),
        })
    }

    fn invalid_value(unexp: de::Unexpected, exp: &dyn de::Expected) -> Self {
        DeError::new(DeErrorKind::WrongType {
            found: yaml_found(&unexp),
            wanted: yaml_wanted(&exp.to_string()),
        })
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        DeError::new(DeErrorKind::UnknownKey {
            key: field.to_string(),
            valid: expected.to_vec(),
        })
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        DeError::new(DeErrorKind::UnknownValue {
            value: variant.to_string(),
            valid: expected.to_vec(),
        })
    }

    fn missing_field(field: &'static str) -> Self {
        DeError::new(DeErrorKind::MissingKey(field))
    }
}

/// serde's description of a value, in YAML words.
fn yaml_found(unexp: &de::Unexpected) -> String {
    match unexp {
        de::Unexpected::Bool(b) => format!("`{b}`"),
        de::Unexpected::Unsigned(n) => format!("the number {n}"),
        de::Unexpected::Signed(n) => format!("the number {n}"),
        de::Unexpected::Float(n) => format!("the number {n}"),
        de::Unexpected::Str(s) => format!("the text {s:?}"),
        de::Unexpected::Unit => "an empty value".to_string(),
        de::Unexpected::Seq => "a list".to_string(),
        de::Unexpected::Map => "a mapping".to_string(),
        other => other.to_string(),
    }
}

/// serde's description of a Rust type, in YAML words.
fn yaml_wanted(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "`true` or `false`".to_string(),
        "a string" => "text".to_string(),
        "a sequence" => "a list".to_string(),
        "a map" => "a mapping".to_string(),
        other if other.starts_with("struct ") => "a mapping of keys".to_string(),
        other if other.starts_with("variant identifier") || other.starts_with("enum ") => {
            "one of the listed values".to_string()
        }
        other => other.to_string(),
    }
}

/// Whether a visitor builds a value from named keys (a struct, a struct variant or an
/// internally tagged enum), which serde would otherwise also build from a list.
fn wants_keys(visitor: &dyn de::Expected) -> bool {
    let expecting = visitor.to_string();
    expecting.starts_with("struct ") || expecting.starts_with("internally tagged enum")
}

/// Deserialize `T` from a tree.
pub fn from_node<'a, T: de::Deserialize<'a>>(node: &'a Node) -> Result<T, DeError> {
    T::deserialize(NodeDe {
        node,
        path: String::new(),
    })
}

struct NodeDe<'a> {
    node: &'a Node,
    path: String,
}

impl<'a> NodeDe<'a> {
    /// Tag an error that has no place yet with this node; for an unknown key or value that
    /// serde found in a buffered mapping (internally tagged checks), with the key or value
    /// node inside this mapping that holds it.
    fn place(&self, mut error: DeError) -> DeError {
        if error.at.is_some() {
            return error;
        }
        let inner = match &error.kind {
            DeErrorKind::UnknownKey { key, .. } => self.node.key(key),
            DeErrorKind::UnknownValue { value, .. } => self.node.value_equal_to(value),
            _ => None,
        };
        error.at = Some(inner.unwrap_or(self.node).position());
        error.path = self.path.clone();
        error
    }

    fn child(&self, node: &'a Node, segment: &str) -> NodeDe<'a> {
        let path = if segment.starts_with('[') || self.path.is_empty() {
            format!("{}{segment}", self.path)
        } else {
            format!("{}.{segment}", self.path)
        };
        NodeDe { node, path }
    }
}

macro_rules! forward_to_any {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
                self.deserialize_any(visitor)
            }
        )*
    };
}

impl<'de, 'a> Deserializer<'de> for NodeDe<'a>
where
    'a: 'de,
{
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match &self.node.value {
            NodeValue::Null => visitor.visit_unit(),
            NodeValue::Bool(b) => visitor.visit_bool(*b),
            NodeValue::Int(i) => visitor.visit_i64(*i),
            NodeValue::Uint(u) => visitor.visit_u64(*u),
            NodeValue::Float(f) => visitor.visit_f64(*f),
            NodeValue::Str(s) => visitor.visit_str(s),
            // serde reads a struct from a list by position (`nodes: [1, 2]` would be
            // `control_planes: 1, host_label: "2"`), and an internally tagged enum takes its
            // tag from the first item: a list is never a mapping of keys here.
            NodeValue::Seq(_) if wants_keys(&visitor) => {
                Err(de::Error::invalid_type(de::Unexpected::Seq, &visitor))
            }
            NodeValue::Seq(items) => visitor.visit_seq(Seq {
                items: items.iter(),
                index: 0,
                parent: &self,
            }),
            NodeValue::Map(entries) => visitor.visit_map(Map {
                entries: entries.iter(),
                value: None,
                parent: &self,
            }),
        };
        result.map_err(|e| self.place(e))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node.value {
            NodeValue::Null => visitor.visit_none().map_err(|e| self.place(e)),
            _ => {
                let (node, path) = (self.node, self.path.clone());
                visitor
                    .visit_some(NodeDe { node, path })
                    .map_err(|e| self.place(e))
            }
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.value {
            NodeValue::Seq(_) | NodeValue::Map(_) | NodeValue::Null => {
                self.deserialize_any(visitor)
            }
            _ => {
                let text = self.node.as_text().unwrap_or_default();
                visitor.visit_str(&text).map_err(|e| self.place(e))
            }
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let (node, path) = (self.node, self.path.clone());
        visitor
            .visit_newtype_struct(NodeDe { node, path })
            .map_err(|e| self.place(e))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let result = match &self.node.value {
            NodeValue::Str(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            NodeValue::Map(entries) if entries.len() == 1 => visitor.visit_enum(Enum {
                key: &entries[0].0,
                value: &entries[0].1,
                parent: &self,
            }),
            _ => return self.deserialize_any(visitor),
        };
        result.map_err(|e| self.place(e))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    forward_to_any! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_f32
        deserialize_f64 deserialize_char deserialize_bytes deserialize_byte_buf
        deserialize_unit deserialize_seq deserialize_map
    }
}

struct Seq<'a, 'p> {
    items: std::slice::Iter<'a, Node>,
    index: usize,
    parent: &'p NodeDe<'a>,
}

impl<'de, 'a, 'p> SeqAccess<'de> for Seq<'a, 'p>
where
    'a: 'de,
{
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let segment = format!("[{}]", self.index);
        self.index += 1;
        // Errors serde raises after our node returned (buffered, internally tagged values)
        // are placed here, at the item.
        let place = self.parent.child(item, &segment);
        seed.deserialize(self.parent.child(item, &segment))
            .map(Some)
            .map_err(|e| place.place(e))
    }
}

struct Map<'a, 'p> {
    entries: std::slice::Iter<'a, (Node, Node)>,
    value: Option<(&'a Node, String)>,
    parent: &'p NodeDe<'a>,
}

impl<'de, 'a, 'p> MapAccess<'de> for Map<'a, 'p>
where
    'a: 'de,
{
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let name = key.as_text().unwrap_or_default();
        self.value = Some((value, name));
        // A key's errors (unknown key) belong to the mapping's path, at the key's place.
        let key_de = NodeDe {
            node: key,
            path: self.parent.path.clone(),
        };
        seed.deserialize(key_de).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let (value, name) = self
            .value
            .take()
            .ok_or_else(|| <DeError as de::Error>::custom("a value without its key"))?;
        let place = self.parent.child(value, &name);
        seed.deserialize(self.parent.child(value, &name))
            .map_err(|e| place.place(e))
    }
}

struct Enum<'a, 'p> {
    key: &'a Node,
    value: &'a Node,
    parent: &'p NodeDe<'a>,
}

impl<'de, 'a, 'p> EnumAccess<'de> for Enum<'a, 'p>
where
    'a: 'de,
{
    type Error = DeError;
    type Variant = NodeDe<'a>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, NodeDe<'a>), DeError> {
        let name = self.key.as_text().unwrap_or_default();
        let variant = seed.deserialize(NodeDe {
            node: self.key,
            path: self.parent.path.clone(),
        })?;
        Ok((variant, self.parent.child(self.value, &name)))
    }
}

impl<'de, 'a> VariantAccess<'de> for NodeDe<'a>
where
    'a: 'de,
{
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DeError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::spans::parse;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Top {
        #[allow(dead_code)]
        nodes: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        #[allow(dead_code)]
        count: u32,
    }

    fn err(text: &str) -> DeError {
        let tree = parse(text).unwrap();
        from_node::<Top>(&tree).unwrap_err()
    }

    #[test]
    fn an_unknown_key_points_at_the_key_itself() {
        let e = err("nodes:\n  count: 3\n  cuont: 4\n");
        assert_eq!(e.at, Some((3, 3)));
        assert_eq!(e.path, "nodes");
        assert!(matches!(e.kind, DeErrorKind::UnknownKey { ref key, .. } if key == "cuont"));
    }

    #[test]
    fn a_wrong_type_points_at_the_value_in_yaml_words() {
        let e = err("nodes:\n  count: three\n");
        assert_eq!(e.at, Some((2, 10)));
        assert_eq!(e.path, "nodes.count");
        assert_eq!(
            e.to_string(),
            "the text \"three\" where a whole number is expected"
        );
    }

    #[test]
    fn a_missing_key_points_at_its_mapping() {
        let e = err("nodes:\n  {}\n");
        assert_eq!(e.kind, DeErrorKind::MissingKey("count"));
        assert_eq!(e.path, "nodes");
    }
}
