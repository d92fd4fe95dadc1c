//! Objects as JSON texts, grouped by kind, before they become a typed [`State`]. The
//! snapshot reader fills a [`RawState`] with the text of each object, borrowed from the
//! files it read; one decode then types every object through the
//! [registry](super::registry), as the live collector does page by page, so both paths
//! accept and reject exactly the same shapes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::kinds::Kind;
use super::registry;
use crate::state::{Collected, Source, State};

/// For each kind: the JSON texts of its objects, or why they could not be collected.
#[derive(Debug, Default)]
pub struct RawState<'a> {
    pub lists: BTreeMap<Kind, Result<Vec<&'a str>, registry::KindUnread>>,
    /// What a `gates snapshot` file recorded of Talos, the API endpoint and Proxmox.
    pub infra: Option<super::infra_record::InfraRecord>,
    /// What each `gates snapshot` file recorded of its origin, with the file.
    pub provenance: Vec<(std::path::PathBuf, crate::state::provenance::Provenance)>,
    /// What each file recorded as missing when written with `--allow-incomplete`.
    pub incomplete: Vec<(std::path::PathBuf, String)>,
}

impl<'a> RawState<'a> {
    pub fn push(&mut self, kind: Kind, object: &'a str) {
        // A kind already known to be absent stays absent.
        if let Ok(items) = self.lists.entry(kind).or_insert_with(|| Ok(Vec::new())) {
            items.push(object);
        }
    }

    /// Mark a kind as collected (possibly with no objects).
    pub fn mark_present(&mut self, kind: Kind) {
        self.lists.entry(kind).or_insert_with(|| Ok(Vec::new()));
    }

    pub fn mark_absent(&mut self, kind: Kind, reason: String) {
        self.lists.insert(kind, Err(registry::KindUnread(reason)));
    }

    /// Type every object. An object that does not fit its kind's shape makes that kind
    /// absent with a reason naming the object, so the checks that need it say why.
    pub fn into_state(mut self, source: Source, collected_at: DateTime<Utc>) -> State {
        let mut state = State::empty(source, collected_at);
        for kind in Kind::ALL {
            let raw = self.lists.remove(&kind).unwrap_or_else(|| {
                Err(registry::KindUnread(format!(
                    "{} was not collected",
                    kind.coordinates().resource_name()
                )))
            });
            let objects = raw.and_then(|texts| registry::decode_parallel(kind, &texts));
            registry::store(&mut state, kind, objects);
        }
        state
    }
}

/// Type objects already held as JSON values (what `gates snapshot` writes), as the
/// registry types texts.
pub fn typed<T: DeserializeOwned>(
    kind: Kind,
    raw: Result<Vec<Value>, registry::KindUnread>,
) -> Collected<Vec<T>> {
    let values = match raw {
        Ok(values) => values,
        Err(reason) => return Collected::Absent(reason.0),
    };
    let mut items = Vec::with_capacity(values.len());
    for value in values {
        let name = registry::object_name(&value);
        match serde_json::from_value(value) {
            Ok(item) => items.push(item),
            Err(err) => {
                return Collected::Absent(format!(
                    "{} {name} has an unexpected shape: {err}",
                    kind.coordinates().kind
                ));
            }
        }
    }
    Collected::Present(items)
}
