//! Lists read in the API server's protobuf encoding (`application/vnd.kubernetes.protobuf`),
//! decoded straight into the shapes gates holds, as the JSON path decodes its texts.
//!
//! Protobuf is the API server's cheapest encoding to write and ours to read, and client-go's
//! default for built-in types. Gates reads the kinds a cluster has by the thousand in it: pods
//! (into the slim pod), nodes and leases (whole, as k8s-openapi's types). Custom resources
//! have no protobuf schema, and the controllers, budgets and services (tens to hundreds of
//! objects, held whole with their pod templates) stay in JSON. A protobuf body is the four bytes `k8s\0` and a `runtime.Unknown` whose `raw` holds the
//! list message (apimachinery `runtime/serializer/protobuf/protobuf.go`).
//!
//! The messages in [`wire`], [`meta`], [`pod`], [`node`] and [`lease`] declare the fields gates holds, with the
//! tags of the Kubernetes `generated.proto` files (k8s.io/api and apimachinery v0.36.3); every
//! other field is skipped while decoding, which is how protobuf treats a field a reader does
//! not know. Where Go writes a value type (`string`, `int32`) in protobuf even when it is
//! empty but leaves it out of JSON (`omitempty`), the empty value reads as absent, so that both
//! encodings of one object decode to the same value (the real API server is the oracle of
//! that in `tests/integration/real_kube_protobuf.rs`).

pub mod lease;
pub mod meta;
pub mod node;
pub mod pod;
pub mod wire;

use super::kinds::Kind;
use super::registry::Objects;
use wire::DecodeError;

/// The media type asked for; JSON is the fallback the API server answers in for kinds it has
/// no protobuf encoding of.
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// The media type of a protobuf answer.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Whether gates decodes `kind` from protobuf (the others are asked for in JSON only).
pub fn reads(kind: Kind) -> bool {
    match kind {
        Kind::Pod | Kind::Node | Kind::Lease => true,
        Kind::Deployment
        | Kind::DaemonSet
        | Kind::StatefulSet
        | Kind::PodDisruptionBudget
        | Kind::Service
        | Kind::L2AnnouncementPolicy
        | Kind::LonghornNode
        | Kind::LonghornVolume
        | Kind::LonghornReplica
        | Kind::LonghornSetting
        | Kind::NodeMetrics
        | Kind::PodMetrics => false,
    }
}

/// One page of a list: its objects and where the list goes on.
#[derive(Debug)]
pub struct ListPage {
    pub objects: Objects,
    pub list: wire::ListMeta,
}

/// Decode one page of `kind` from a protobuf body.
pub fn decode_list(kind: Kind, body: &[u8]) -> Result<ListPage, DecodeError> {
    refuse_unread(kind)?;
    open(body)?.decode(kind)
}

/// A page's body with its envelope opened once: the list's metadata is read first (so that
/// the next page can be asked for while this one is decoded), then its items, from the same
/// bytes.
#[derive(Debug)]
pub struct Opened {
    type_meta: wire::TypeMeta,
    raw: Vec<u8>,
}

/// Open a protobuf body's envelope; what is not one is refused.
pub fn open(body: &[u8]) -> Result<Opened, DecodeError> {
    let (type_meta, raw) = wire::open(body)?;
    Ok(Opened { type_meta, raw })
}

impl Opened {
    /// The list's metadata alone (its items are skipped here).
    pub fn head(&self) -> Result<wire::ListMeta, DecodeError> {
        #[derive(Clone, PartialEq, prost::Message)]
        struct Head {
            #[prost(message, optional, tag = "1")]
            metadata: Option<wire::ListMeta>,
        }
        Ok(wire::decode::<Head>(&self.raw, "list")?
            .metadata
            .unwrap_or_default())
    }

    /// The page's objects, as `kind`.
    pub fn decode(&self, kind: Kind) -> Result<ListPage, DecodeError> {
        refuse_unread(kind)?;
        // Protobuf carries no field names, so a body of another kind would decode, into
        // nonsense: the envelope's kind is compared first.
        let expected = format!("{}List", kind.coordinates().kind);
        let named = self.type_meta.kind.as_deref().unwrap_or_default();
        if named != expected {
            return Err(DecodeError(format!(
                "the body holds a {} {}, not a {expected}",
                self.type_meta.api_version.as_deref().unwrap_or_default(),
                if named.is_empty() {
                    "object of no kind"
                } else {
                    named
                }
            )));
        }
        let raw = &self.raw;
        let (objects, list) = match kind {
            Kind::Pod => {
                let list = wire::decode::<pod::PodList>(raw, "PodList")?;
                (Objects::Pod(convert(list.items)?), list.metadata)
            }
            Kind::Node => {
                let list = wire::decode::<node::NodeList>(raw, "NodeList")?;
                (Objects::Node(convert(list.items)?), list.metadata)
            }
            Kind::Lease => {
                let list = wire::decode::<lease::LeaseList>(raw, "LeaseList")?;
                (Objects::Lease(convert(list.items)?), list.metadata)
            }
            other => return Err(not_read(other)),
        };
        Ok(ListPage {
            objects,
            list: list.unwrap_or_default(),
        })
    }
}

fn refuse_unread(kind: Kind) -> Result<(), DecodeError> {
    if reads(kind) {
        Ok(())
    } else {
        Err(not_read(kind))
    }
}

fn not_read(kind: Kind) -> DecodeError {
    DecodeError(format!(
        "{} is not read from protobuf",
        kind.coordinates().resource_name()
    ))
}

/// Each decoded message into the shape gates holds; the first that cannot be is the error.
/// The items converted, each behind an `Arc` as the state holds them.
fn convert<M, T: TryFrom<M, Error = DecodeError>>(
    items: Vec<M>,
) -> Result<Vec<std::sync::Arc<T>>, DecodeError> {
    items
        .into_iter()
        .map(|item| T::try_from(item).map(std::sync::Arc::new))
        .collect()
}

/// The list's metadata alone, read before its items (which are skipped here) so that the
/// next page can be asked for while this one is decoded.
pub fn head(body: &[u8]) -> Result<wire::ListMeta, DecodeError> {
    open(body)?.head()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// A page of two pods, encoded as the API server encodes one.
    pub(crate) fn page() -> Vec<u8> {
        let list = pod::PodList {
            metadata: Some(wire::ListMeta {
                resource_version: Some("7".into()),
                continue_: Some("next".into()),
                remaining_item_count: Some(3),
            }),
            items: vec![
                pod::Pod {
                    metadata: Some(meta::ObjectMeta {
                        name: Some("web-1".into()),
                        namespace: Some("apps".into()),
                        uid: Some(String::new()),
                        labels: [("app".to_string(), "web".to_string())].into(),
                        ..Default::default()
                    }),
                    spec: Some(pod::PodSpec {
                        node_name: Some(String::new()),
                        containers: vec![pod::Container {
                            name: Some("app".into()),
                            resources: Some(pod::ResourceRequirements {
                                requests: [(
                                    "cpu".to_string(),
                                    meta::Quantity {
                                        string: Some("100m".into()),
                                    },
                                )]
                                .into(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    status: None,
                },
                pod::Pod::default(),
            ],
        };
        wire::wrap("v1", "PodList", list.encode_to_vec())
    }

    #[test]
    fn a_page_of_pods_decodes_with_its_next_token_and_empty_go_values_as_absent() {
        let body = page();
        let head = head(&body).unwrap();
        assert_eq!(head.next().as_deref(), Some("next"));
        assert_eq!(head.remaining(), 3);
        let page = decode_list(Kind::Pod, &body).unwrap();
        let Objects::Pod(pods) = page.objects else {
            panic!("pods decoded as {:?}", page.objects);
        };
        assert_eq!(pods.len(), 2);
        assert_eq!(pods[0].metadata.name.as_deref(), Some("web-1"));
        assert_eq!(
            pods[0].metadata.uid, None,
            "an empty uid is absent, as in JSON"
        );
        let spec = pods[0].spec.as_ref().unwrap();
        assert_eq!(spec.node_name, None);
        assert_eq!(
            spec.containers[0]
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .map(|r| r["cpu"].0.as_str()),
            Some("100m")
        );
        assert_eq!(*pods[1], gates_core::state::Pod::default());
    }

    #[test]
    fn a_kind_not_read_from_protobuf_is_refused_and_a_cut_page_is_an_error() {
        let body = page();
        assert!(
            decode_list(Kind::Service, &body)
                .unwrap_err()
                .0
                .contains("not read from protobuf")
        );
        // Protobuf carries no field names: a page of pods would decode as nodes, into
        // nonsense, if the envelope's kind were not compared first.
        let err = decode_list(Kind::Node, &body).unwrap_err();
        assert!(
            err.0.contains("holds a v1 PodList, not a NodeList"),
            "{err}"
        );
        for cut in 0..body.len() {
            let _ = decode_list(Kind::Pod, &body[..cut]);
        }
        assert!(decode_list(Kind::Pod, &body[..body.len() - 5]).is_err());
    }

    #[test]
    fn a_deletion_time_beyond_what_rfc_3339_writes_is_an_error_not_another_time() {
        let list = pod::PodList {
            metadata: None,
            items: vec![pod::Pod {
                metadata: Some(meta::ObjectMeta {
                    deletion_timestamp: Some(meta::Time {
                        seconds: Some(i64::MAX / 2),
                        nanos: None,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        let body = wire::wrap("v1", "PodList", list.encode_to_vec());
        assert!(
            decode_list(Kind::Pod, &body)
                .unwrap_err()
                .0
                .contains("out of range")
        );
    }
}
