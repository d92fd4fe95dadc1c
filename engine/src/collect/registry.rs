//! The one table of collected resources: for each [`Kind`], the [`State`] field its objects
//! go to and the type they are decoded into. The snapshot reader and the live collector both
//! decode through it, straight from each object's JSON text into that type (no generic JSON
//! tree in between), so both accept and reject exactly the same shapes; the matches below
//! are exhaustive, so a kind added to [`Kind`] without a row here does not compile.

use serde::de::DeserializeOwned;
use std::sync::Arc;

use super::kinds::Kind;
use crate::state::{
    Collected, L2AnnouncementPolicy, LonghornNode, LonghornReplica, LonghornSetting,
    LonghornVolume, NodeMetrics, Pod, PodMetrics, State,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

gates_core::sentence_error! {
    /// Why one kind's objects are not in the state: the first object that does not fit the kind's
    /// shape, named (`Pod team/app-1 has an unexpected shape: …`), or why the kind could not be
    /// listed. Stored as the kind's [`Collected::Absent`] reason, the sentence alone.
    pub struct KindUnread;
}

macro_rules! registry {
    ($($kind:ident => $field:ident: $ty:ty,)*) => {
        /// The typed objects of one kind.
        #[derive(Debug)]
        pub enum Objects {
            $($kind(Vec<$ty>),)*
        }

        impl Objects {
            /// No objects of `kind`.
            pub fn empty(kind: Kind) -> Objects {
                match kind {
                    $(Kind::$kind => Objects::$kind(Vec::new()),)*
                }
            }

            /// Decode the JSON texts of `kind`'s objects, in order; the first that does not
            /// fit the kind's shape is the error, with its name.
            pub fn decode(kind: Kind, texts: &[&str]) -> Result<Objects, KindUnread> {
                Objects::decode_with_room(kind, texts, texts.len())
            }

            /// [`Objects::decode`] with room for `room` objects, so that more can be
            /// appended without moving these.
            pub fn decode_with_room(kind: Kind, texts: &[&str], room: usize) -> Result<Objects, KindUnread> {
                match kind {
                    $(Kind::$kind => decode_all::<$ty>(kind, texts, room).map(Objects::$kind),)*
                }
            }

            pub fn len(&self) -> usize {
                match self {
                    $(Objects::$kind(items) => items.len(),)*
                }
            }

            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Decode already parsed JSON values of `kind`, the way objects were typed before
            /// they were decoded from their text: the reference the tests compare against.
            #[cfg(test)]
            pub fn from_values(kind: Kind, values: Vec<serde_json::Value>) -> Result<Objects, KindUnread> {
                match kind {
                    $(Kind::$kind => values
                        .into_iter()
                        .map(|v| serde_json::from_value::<$ty>(v).map_err(|e| KindUnread(e.to_string())))
                        .collect::<Result<Vec<_>, _>>()
                        .map(Objects::$kind),)*
                }
            }

            /// The objects as JSON, for comparisons.
            #[cfg(test)]
            pub fn to_json(&self) -> serde_json::Value {
                match self {
                    $(Objects::$kind(items) => serde_json::to_value(items).unwrap_or_default(),)*
                }
            }

            /// Append `more` (of the same kind; another kind is a bug and is dropped).
            pub fn extend(&mut self, more: Objects) {
                match (self, more) {
                    $((Objects::$kind(items), Objects::$kind(more)) => items.extend(more),)*
                    _ => debug_assert!(false, "objects of two kinds mixed"),
                }
            }
        }

        /// One kind's objects by `namespace/name`, as a watch keeps them between events.
        #[derive(Debug, Clone)]
        pub enum Keyed {
            $($kind(std::collections::BTreeMap<String, $ty>),)*
        }

        impl Keyed {
            /// A listed kind's objects, by name (a name listed twice keeps the later).
            pub fn from_objects(objects: Objects) -> Keyed {
                match objects {
                    $(Objects::$kind(items) => Keyed::$kind(
                        items
                            .into_iter()
                            .map(|o| (gates_core::meta::ns_name(&o.metadata), o))
                            .collect(),
                    ),)*
                }
            }

            /// Add or replace one object from a watch event, and its key when what gates holds
            /// of it changed (a pod's annotations or revision are not held, so a change to
            /// them alone changes nothing); an object that does not fit the kind's shape is
            /// the error, with its name.
            pub fn upsert(&mut self, value: serde_json::Value) -> Result<Option<String>, KindUnread> {
                match self {
                    $(Keyed::$kind(items) => {
                        let name = object_name(&value);
                        let object: $ty = serde_json::from_value(value).map_err(|err| {
                            KindUnread(format!("{} {name} has an unexpected shape: {err}", Kind::$kind.coordinates().kind))
                        })?;
                        let key = gates_core::meta::ns_name(&object.metadata);
                        if items.get(&key) == Some(&object) {
                            return Ok(None);
                        }
                        items.insert(key.clone(), object);
                        Ok(Some(key))
                    })*
                }
            }

            /// Bring `state`'s field of this kind up to date for the objects named by `keys`
            /// alone: each replaced, added or taken away where it sorts, so the field equals
            /// what [`Keyed::objects`] would give without copying the rest (at 100,000 pods
            /// the copy took most of a change's re-evaluation). False when the field holds no
            /// list to patch: then the whole kind is copied.
            pub fn patch(&self, state: &mut State, keys: &std::collections::BTreeSet<String>) -> bool {
                match self {
                    $(Keyed::$kind(items) => {
                        let Collected::Present(held) = &mut state.$field else {
                            return false;
                        };
                        for key in keys {
                            let at = held.binary_search_by(|o| {
                                gates_core::meta::ns_name(&o.metadata).as_str().cmp(key.as_str())
                            });
                            match (items.get(key), at) {
                                (Some(object), Ok(i)) => held[i] = object.clone(),
                                (Some(object), Err(i)) => held.insert(i, object.clone()),
                                (None, Ok(i)) => {
                                    held.remove(i);
                                }
                                (None, Err(_)) => {}
                            }
                        }
                        true
                    })*
                }
            }

            /// Take away the object a watch said was deleted; its key.
            pub fn remove(&mut self, value: &serde_json::Value) -> String {
                let key = key_of(value);
                match self {
                    $(Keyed::$kind(items) => { items.remove(&key); })*
                }
                key
            }

            /// The objects, by name, for a state.
            pub fn objects(&self) -> Objects {
                match self {
                    $(Keyed::$kind(items) => Objects::$kind(items.values().cloned().collect()),)*
                }
            }

            pub fn len(&self) -> usize {
                match self {
                    $(Keyed::$kind(items) => items.len(),)*
                }
            }

            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
        }

        /// The name of `kind`'s field in [`State`] (as it serializes).
        pub fn field_name(kind: Kind) -> &'static str {
            match kind {
                $(Kind::$kind => stringify!($field),)*
            }
        }

        /// Put one kind's objects, or why they are missing, into its field of `state`.
        pub fn store(state: &mut State, kind: Kind, objects: Result<Objects, KindUnread>) {
            match (kind, objects) {
                $(
                    (Kind::$kind, Ok(Objects::$kind(items))) => state.$field = Collected::Present(items),
                    (Kind::$kind, Err(reason)) => state.$field = Collected::Absent(reason.0),
                )*
                (kind, Ok(_)) => store(state, kind, Err(KindUnread(format!("{} were decoded as another kind", kind.coordinates().resource_name())))),
            }
        }
    };
}

registry! {
    Node => nodes: Arc<Node>,
    Pod => pods: Arc<Pod>,
    Deployment => deployments: Arc<Deployment>,
    DaemonSet => daemonsets: Arc<DaemonSet>,
    StatefulSet => statefulsets: Arc<StatefulSet>,
    PodDisruptionBudget => pdbs: Arc<PodDisruptionBudget>,
    Service => services: Arc<Service>,
    Lease => leases: Arc<Lease>,
    L2AnnouncementPolicy => l2_policies: Arc<L2AnnouncementPolicy>,
    LonghornNode => longhorn_nodes: Arc<LonghornNode>,
    LonghornVolume => longhorn_volumes: Arc<LonghornVolume>,
    LonghornReplica => longhorn_replicas: Arc<LonghornReplica>,
    LonghornSetting => longhorn_settings: Arc<LonghornSetting>,
    NodeMetrics => node_metrics: Arc<NodeMetrics>,
    PodMetrics => pod_metrics: Arc<PodMetrics>,
}

fn decode_all<T: DeserializeOwned>(
    kind: Kind,
    texts: &[&str],
    room: usize,
) -> Result<Vec<T>, KindUnread> {
    let mut items = Vec::with_capacity(room.max(texts.len()));
    for text in texts {
        match serde_json::from_str(text) {
            Ok(item) => items.push(item),
            Err(err) => return Err(KindUnread(unexpected_shape(kind, text, &err))),
        }
    }
    Ok(items)
}

/// `Pod team/app-1 has an unexpected shape: …`, the error without the position inside the
/// object's own text (meaningless to the reader of the file).
pub fn unexpected_shape(kind: Kind, text: &str, err: &serde_json::Error) -> String {
    let message = err.to_string();
    let message = match message.rfind(" at line ") {
        Some(at) if err.line() > 0 => message[..at].to_string(),
        _ => message,
    };
    format!(
        "{} {} has an unexpected shape: {message}",
        kind.coordinates().kind,
        name_in(text)
    )
}

/// `namespace/name` or `name` of an object's JSON text, for messages.
pub fn name_in(text: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        metadata: serde_json::Value,
    }
    let meta = serde_json::from_str::<Meta>(text)
        .map(|m| m.metadata)
        .unwrap_or_default();
    object_name(&serde_json::json!({ "metadata": meta }))
}

/// The key [`Keyed`] files an object under, read from its JSON as `meta::ns_name` reads it
/// from the typed object (an empty namespace is none).
fn key_of(value: &serde_json::Value) -> String {
    let meta = &value["metadata"];
    let name = meta["name"].as_str().unwrap_or("<unnamed>");
    match meta["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// `namespace/name` or `name` of a JSON object, for messages.
pub fn object_name(value: &serde_json::Value) -> String {
    let meta = &value["metadata"];
    match (meta["namespace"].as_str(), meta["name"].as_str()) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_string(),
        _ => "(unnamed)".to_string(),
    }
}

/// Decode `texts` on every core, in order: the objects of a large cluster are many and
/// independent. The first error in the texts' order wins, as when decoding one by one.
pub fn decode_parallel(kind: Kind, texts: &[&str]) -> Result<Objects, KindUnread> {
    const SERIAL_BELOW: usize = 2048;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || texts.len() < SERIAL_BELOW {
        return Objects::decode(kind, texts);
    }
    let chunk = texts.len().div_ceil(threads);
    let (first, rest) = texts.split_at(chunk.min(texts.len()));
    std::thread::scope(|scope| {
        let handles: Vec<_> = rest
            .chunks(chunk)
            .map(|part| scope.spawn(move || Objects::decode(kind, part)))
            .collect();
        // The first part is decoded here with room for all, so the objects of a large
        // cluster are moved once (appending the later parts) rather than three times.
        let mut all = Objects::decode_with_room(kind, first, texts.len());
        for handle in handles {
            let part = handle
                .join()
                .unwrap_or_else(|_| Err("decoding panicked".into()));
            all = all.and_then(|mut all| {
                all.extend(part?);
                Ok(all)
            });
        }
        all
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(n: usize) -> String {
        format!(
            r#"{{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{{"name":"lease-{n}","namespace":"kube-node-lease"}}}}"#
        )
    }

    #[test]
    fn a_watched_pod_changes_only_when_what_gates_holds_of_it_changes() {
        let pod = |annotation: &str, ready: &str| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "apps", "resourceVersion": annotation,
                             "annotations": {"touched": annotation}},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}
            })
        };
        let mut keyed = Keyed::from_objects(Objects::empty(Kind::Pod));
        assert_eq!(
            keyed.upsert(pod("1", "True")),
            Ok(Some("apps/web-1".into()))
        );
        // Another revision and annotation: nothing gates reads.
        assert_eq!(keyed.upsert(pod("2", "True")), Ok(None));
        assert_eq!(
            keyed.upsert(pod("3", "False")),
            Ok(Some("apps/web-1".into()))
        );
        assert_eq!(keyed.len(), 1);
        keyed.remove(&pod("4", "False"));
        assert!(keyed.is_empty());
    }

    #[test]
    fn a_state_patched_by_key_equals_the_whole_kind_copied_after_every_change() {
        let pod = |ns: u64, n: u64, ready: bool| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p-{n}"), "namespace": format!("ns-{ns}")},
                "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
            })
        };
        let start: Vec<String> = (0..40).map(|n| pod(n % 3, n, true).to_string()).collect();
        let start: Vec<&str> = start.iter().map(String::as_str).collect();
        let mut keyed = Keyed::from_objects(Objects::decode(Kind::Pod, &start).unwrap());
        let mut state = State::empty(
            crate::state::Source::Snapshot { files: vec![] },
            chrono::Utc::now(),
        );
        store(&mut state, Kind::Pod, Ok(keyed.objects()));
        // A fixed pseudo-random walk of changes, additions (sorting anywhere) and deletions,
        // some of them of objects that are not there, patched in batches.
        let mut seed = 7_u64;
        let mut next = |bound: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % bound
        };
        for _ in 0..200 {
            let mut keys = std::collections::BTreeSet::new();
            for _ in 0..=next(4) {
                let (ns, n) = (next(4), next(60));
                if next(3) == 0 {
                    keys.insert(keyed.remove(&pod(ns, n, true)));
                } else if let Some(key) = keyed.upsert(pod(ns, n, next(2) == 0)).unwrap() {
                    keys.insert(key);
                }
            }
            assert!(keyed.patch(&mut state, &keys));
            let Objects::Pod(whole) = keyed.objects() else {
                unreachable!()
            };
            assert_eq!(state.pods.present(), Some(&whole));
        }
        // A field that holds no list is not patched: the caller copies the whole kind.
        state.pods = Collected::Absent("stale".into());
        assert!(!keyed.patch(&mut state, &std::collections::BTreeSet::new()));
    }

    #[test]
    fn many_objects_decode_on_several_threads_to_the_same_objects_in_order() {
        let texts: Vec<String> = (0..5_001).map(lease).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let parallel = decode_parallel(Kind::Lease, &texts).expect("leases");
        assert_eq!(parallel.len(), 5_001);
        assert_eq!(
            parallel.to_json(),
            Objects::decode(Kind::Lease, &texts)
                .expect("leases")
                .to_json()
        );
    }

    #[test]
    fn the_first_bad_object_in_order_is_the_error_whichever_thread_decodes_it() {
        let mut texts: Vec<String> = (0..6_000).map(lease).collect();
        texts[4_500] = r#"{"metadata":{"name":"late"},"spec":7}"#.to_string();
        texts[1_000] = r#"{"metadata":{"name":"early"},"spec":7}"#.to_string();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let err = decode_parallel(Kind::Lease, &texts).expect_err("two bad leases");
        assert!(err.0.contains("Lease early"), "{err}");
    }
}
