//! Object metadata, label selectors, times and quantities as protobuf carries them
//! (apimachinery `pkg/apis/meta/v1/generated.proto`, `pkg/api/resource/generated.proto`),
//! and how each becomes the k8s-openapi value the JSON path decodes.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as api;
use prost::Message;

use super::wire::DecodeError;

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
    type Error = DecodeError;

    fn try_from(m: ObjectMeta) -> Result<Self, DecodeError> {
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
    pub fn timestamp(self) -> Result<k8s_openapi::jiff::Timestamp, DecodeError> {
        let seconds = self.seconds.unwrap_or(0);
        k8s_openapi::jiff::Timestamp::new(seconds, 0)
            .map_err(|_| DecodeError(format!("a time {seconds} s from 1970 is out of range")))
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

/// `metav1.ObjectMeta` whole: for the kinds gates holds as k8s-openapi types, every field
/// the JSON path reads.
#[derive(Clone, PartialEq, Message)]
pub struct FullObjectMeta {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub self_link: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    #[prost(int64, optional, tag = "7")]
    pub generation: Option<i64>,
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    #[prost(int64, optional, tag = "10")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    pub finalizers: Vec<String>,
    #[prost(message, repeated, tag = "17")]
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// `metav1.ManagedFieldsEntry`.
#[derive(Clone, PartialEq, Message)]
pub struct ManagedFieldsEntry {
    #[prost(string, optional, tag = "1")]
    pub manager: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub operation: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub api_version: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub time: Option<Time>,
    #[prost(string, optional, tag = "6")]
    pub fields_type: Option<String>,
    #[prost(message, optional, tag = "7")]
    pub fields_v1: Option<FieldsV1>,
    #[prost(string, optional, tag = "8")]
    pub subresource: Option<String>,
}

/// `metav1.FieldsV1`: the JSON of the fields set, as bytes.
#[derive(Clone, PartialEq, Message)]
pub struct FieldsV1 {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub raw: Option<Vec<u8>>,
}

/// `metav1.MicroTime`: microseconds (apimachinery truncates to them both ways).
#[derive(Clone, PartialEq, Message)]
pub struct MicroTime {
    #[prost(int64, optional, tag = "1")]
    pub seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub nanos: Option<i32>,
}

/// A Go `metav1.Time` held by value (`omitempty` does not leave a struct out): the zero
/// time is written as an empty message in protobuf and as `null` in JSON, so a time
/// without seconds is absent.
pub fn time(t: Option<Time>) -> Result<Option<api::Time>, DecodeError> {
    t.filter(|t| t.seconds.is_some())
        .map(Time::timestamp)
        .transpose()
        .map(|t| t.map(api::Time))
}

/// A `*metav1.MicroTime`, at the microsecond.
pub fn micro_time(t: Option<MicroTime>) -> Result<Option<api::MicroTime>, DecodeError> {
    t.map(|t| {
        let seconds = t.seconds.unwrap_or(0);
        let nanos = t.nanos.unwrap_or(0) / 1000 * 1000;
        k8s_openapi::jiff::Timestamp::new(seconds, nanos)
            .map(api::MicroTime)
            .map_err(|_| DecodeError(format!("a time {seconds} s from 1970 is out of range")))
    })
    .transpose()
}

impl TryFrom<FullObjectMeta> for api::ObjectMeta {
    type Error = DecodeError;

    fn try_from(m: FullObjectMeta) -> Result<Self, DecodeError> {
        Ok(api::ObjectMeta {
            name: text(m.name),
            generate_name: text(m.generate_name),
            namespace: text(m.namespace),
            self_link: text(m.self_link),
            uid: text(m.uid),
            resource_version: text(m.resource_version),
            generation: m.generation.filter(|&g| g != 0),
            creation_timestamp: time(m.creation_timestamp)?,
            deletion_timestamp: m
                .deletion_timestamp
                .map(Time::timestamp)
                .transpose()?
                .map(api::Time),
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            labels: map(m.labels, |v| v),
            annotations: map(m.annotations, |v| v),
            owner_references: list(m.owner_references, Into::into),
            finalizers: list(m.finalizers, |f| f),
            managed_fields: (!m.managed_fields.is_empty())
                .then(|| {
                    m.managed_fields
                        .into_iter()
                        .map(|f| {
                            Ok(api::ManagedFieldsEntry {
                                manager: text(f.manager),
                                operation: text(f.operation),
                                api_version: text(f.api_version),
                                time: f.time.map(Time::timestamp).transpose()?.map(api::Time),
                                fields_type: text(f.fields_type),
                                fields_v1: f
                                    .fields_v1
                                    .map(|v| {
                                        serde_json::from_slice(&v.raw.unwrap_or_default())
                                            .map(api::FieldsV1)
                                            .map_err(|e| {
                                                format!("managedFields: fieldsV1 is not JSON: {e}")
                                            })
                                    })
                                    .transpose()?,
                                subresource: text(f.subresource),
                            })
                        })
                        .collect::<Result<Vec<_>, DecodeError>>()
                })
                .transpose()?,
        })
    }
}
