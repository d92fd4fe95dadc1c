//! Object metadata, label selectors, times and quantities as protobuf carries them
//! (apimachinery `pkg/apis/meta/v1/generated.proto`, `pkg/api/resource/generated.proto`),
//! and how each becomes the k8s-openapi value the JSON path decodes.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as api;
use prost::Message;

/// `metav1.ObjectMeta`, down to what [`gates_core::state::meta::placement`] keeps.
#[derive(Clone, PartialEq, Message)]
pub struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
}

/// `metav1.OwnerReference`.
#[derive(Clone, PartialEq, Message)]
pub struct OwnerReference {
    #[prost(string, optional, tag = "1")]
    pub kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub api_version: Option<String>,
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    pub block_owner_deletion: Option<bool>,
}

/// `metav1.Time`: whole seconds (apimachinery writes no nanoseconds, as JSON's RFC 3339 has
/// none).
#[derive(Clone, PartialEq, Message)]
pub struct Time {
    #[prost(int64, optional, tag = "1")]
    pub seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub nanos: Option<i32>,
}

/// `metav1.LabelSelector`.
#[derive(Clone, PartialEq, Message)]
pub struct LabelSelector {
    #[prost(btree_map = "string, string", tag = "1")]
    pub match_labels: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "2")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// `metav1.LabelSelectorRequirement`.
#[derive(Clone, PartialEq, Message)]
pub struct LabelSelectorRequirement {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub operator: Option<String>,
    #[prost(string, repeated, tag = "3")]
    pub values: Vec<String>,
}

/// `resource.Quantity`: its canonical text, as JSON writes it.
#[derive(Clone, PartialEq, Message)]
pub struct Quantity {
    #[prost(string, optional, tag = "1")]
    pub string: Option<String>,
}

/// A Go `string` with `omitempty`: protobuf carries the empty string, JSON leaves it out.
pub fn text(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// A Go `string` without `omitempty` (always in JSON, empty or not).
pub fn always(s: Option<String>) -> String {
    s.unwrap_or_default()
}

/// A Go slice with `omitempty`: empty reads as absent.
pub fn list<T, U>(items: Vec<T>, each: impl FnMut(T) -> U) -> Option<Vec<U>> {
    (!items.is_empty()).then(|| items.into_iter().map(each).collect())
}

/// A Go map with `omitempty`: empty reads as absent.
pub fn map<V, U>(
    entries: BTreeMap<String, V>,
    mut each: impl FnMut(V) -> U,
) -> Option<BTreeMap<String, U>> {
    (!entries.is_empty()).then(|| entries.into_iter().map(|(k, v)| (k, each(v))).collect())
}

/// A `ResourceList` (`omitempty`).
pub fn quantities(entries: BTreeMap<String, Quantity>) -> Option<BTreeMap<String, ApiQuantity>> {
    map(entries, |q| ApiQuantity(always(q.string)))
}

impl TryFrom<ObjectMeta> for api::ObjectMeta {
    type Error = String;

    fn try_from(m: ObjectMeta) -> Result<Self, String> {
        Ok(api::ObjectMeta {
            deletion_timestamp: m
                .deletion_timestamp
                .map(Time::timestamp)
                .transpose()?
                .map(api::Time),
            name: text(m.name),
            namespace: text(m.namespace),
            uid: text(m.uid),
            labels: map(m.labels, |v| v),
            owner_references: list(m.owner_references, Into::into),
            ..api::ObjectMeta::default()
        })
    }
}

impl From<OwnerReference> for api::OwnerReference {
    fn from(o: OwnerReference) -> Self {
        api::OwnerReference {
            api_version: always(o.api_version),
            kind: always(o.kind),
            name: always(o.name),
            uid: always(o.uid),
            controller: o.controller,
            block_owner_deletion: o.block_owner_deletion,
        }
    }
}

impl Time {
    /// The instant, at the second; one outside what RFC 3339 can write (and so what the
    /// JSON path could read) is an error, never a different time.
    pub fn timestamp(self) -> Result<k8s_openapi::jiff::Timestamp, String> {
        let seconds = self.seconds.unwrap_or(0);
        k8s_openapi::jiff::Timestamp::new(seconds, 0)
            .map_err(|_| format!("a time {seconds} s from 1970 is out of range"))
    }
}

impl From<LabelSelector> for api::LabelSelector {
    fn from(s: LabelSelector) -> Self {
        api::LabelSelector {
            match_labels: map(s.match_labels, |v| v),
            match_expressions: list(s.match_expressions, |r| api::LabelSelectorRequirement {
                key: always(r.key),
                operator: always(r.operator),
                values: list(r.values, |v| v),
            }),
        }
    }
}
