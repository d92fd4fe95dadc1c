//! `coordination.k8s.io/v1` Lease as protobuf carries it (k8s.io/api
//! `coordination/v1/generated.proto`): every field, as gates holds leases whole.

use k8s_openapi::api::coordination::v1 as api;
use prost::Message;

use super::wire::DecodeError;

use super::meta::{FullObjectMeta, MicroTime, micro_time};

/// `LeaseList`.
#[derive(Clone, PartialEq, Message)]
pub struct LeaseList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<super::wire::ListMeta>,
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<Lease>,
}

/// `Lease`.
#[derive(Clone, PartialEq, Message)]
pub struct Lease {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<FullObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<LeaseSpec>,
}

/// `LeaseSpec`: every field is a pointer in Go, so presence is kept as it came.
#[derive(Clone, PartialEq, Message)]
pub struct LeaseSpec {
    #[prost(string, optional, tag = "1")]
    pub holder_identity: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub lease_duration_seconds: Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub acquire_time: Option<MicroTime>,
    #[prost(message, optional, tag = "4")]
    pub renew_time: Option<MicroTime>,
    #[prost(int32, optional, tag = "5")]
    pub lease_transitions: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub strategy: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub preferred_holder: Option<String>,
}

impl TryFrom<Lease> for api::Lease {
    type Error = DecodeError;

    fn try_from(l: Lease) -> Result<Self, DecodeError> {
        Ok(api::Lease {
            metadata: l
                .metadata
                .map(TryInto::try_into)
                .transpose()?
                .unwrap_or_default(),
            spec: l
                .spec
                .map(|s| {
                    Ok::<_, DecodeError>(api::LeaseSpec {
                        holder_identity: s.holder_identity,
                        lease_duration_seconds: s.lease_duration_seconds,
                        acquire_time: micro_time(s.acquire_time)?,
                        renew_time: micro_time(s.renew_time)?,
                        lease_transitions: s.lease_transitions,
                        strategy: s.strategy,
                        preferred_holder: s.preferred_holder,
                    })
                })
                .transpose()?,
        })
    }
}
