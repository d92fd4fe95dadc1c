//! The parts of an environment's manifests gates could not read, and which kinds of object
//! they may hold: one unreadable part makes only the trials that read those kinds `error`.
//! The engine walks a part's files to list the kinds (`repo::unread`); what it finds is held
//! here.

use std::collections::BTreeSet;

use super::site::RepoError;
use super::yaml::Node;

/// A part of the manifests that was not read.
#[derive(Debug, Clone)]
pub struct Unread {
    /// Why: the construct, with its file and line.
    pub error: RepoError,
    /// The kinds it may hold.
    pub kinds: Kinds,
    /// The one object it is, where it is one (a manifest Flux substitution left unread),
    /// with the variables gates could not substitute still written `${...}`: a trial whose
    /// target this object cannot be, whatever they hold, reads on without it.
    pub object: Option<Node>,
}

/// Whether any text below `node` still holds a `${...}` variable.
pub fn holds_variable(node: &Node) -> bool {
    use super::yaml::Value;
    match &node.value {
        Value::Scalar(text, _) => text.contains("${"),
        Value::Seq(items) => items.iter().any(holds_variable),
        Value::Map(entries) => entries
            .iter()
            .any(|(k, v)| k.contains("${") || holds_variable(v)),
        Value::Null => false,
    }
}

/// The kinds of object an unread part may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kinds {
    Any,
    Only(BTreeSet<String>),
}

impl Kinds {
    pub fn one(kind: &str) -> Kinds {
        Kinds::Only(BTreeSet::from([kind.to_string()]))
    }

    /// Whether an object of one of `reads` may be among them.
    pub fn may_hold(&self, reads: &[&str]) -> bool {
        match self {
            Kinds::Any => true,
            Kinds::Only(kinds) => reads.iter().any(|k| kinds.contains(*k)),
        }
    }
}
