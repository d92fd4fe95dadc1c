//! The envelope around every protobuf body, and the list and status messages every kind
//! shares (apimachinery `pkg/runtime/generated.proto`, `pkg/apis/meta/v1/generated.proto`).

use prost::Message;

gates_core::sentence_error! {
    /// Why a protobuf body is not what gates reads: which part did not decode, and how. Said
    /// as the reason of the list's error, which names the resource.
    pub struct DecodeError;
}

/// `k8s` and the encoding style 0: an `Unknown` follows.
const MAGIC: [u8; 4] = [0x6b, 0x38, 0x73, 0x00];

/// `runtime.Unknown`: the object's type and its encoded bytes.
#[derive(Clone, PartialEq, Message)]
pub struct Unknown {
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub raw: Option<Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    pub content_encoding: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub content_type: Option<String>,
}

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, Message)]
pub struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    pub api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub kind: Option<String>,
}

/// `metav1.ListMeta`: the list's revision and the next page's token.
#[derive(Clone, PartialEq, Message)]
pub struct ListMeta {
    #[prost(string, optional, tag = "2")]
    pub resource_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub continue_: Option<String>,
    #[prost(int64, optional, tag = "4")]
    pub remaining_item_count: Option<i64>,
}

impl ListMeta {
    /// The next page's token; an empty one ends the list, as in JSON.
    pub fn next(&self) -> Option<String> {
        self.continue_.clone().filter(|t| !t.is_empty())
    }

    /// The list's revision (what a watch resumes from).
    pub fn revision(&self) -> Option<String> {
        self.resource_version.clone().filter(|r| !r.is_empty())
    }

    /// How many objects the server says remain after this page (0 when it gives none or a
    /// count that is not one).
    pub fn remaining(&self) -> usize {
        self.remaining_item_count
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    }
}

/// `metav1.Status`: what an error answer holds, in the encoding that was asked for.
#[derive(Clone, PartialEq, Message)]
pub struct Status {
    #[prost(string, optional, tag = "2")]
    pub status: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub message: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub reason: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub code: Option<i32>,
}

/// The encoded object inside a body, after its magic and envelope; what is not a protobuf
/// body of the one encoding style Kubernetes defines is refused, never guessed at.
pub fn unwrap(body: &[u8]) -> Result<Vec<u8>, DecodeError> {
    open(body).map(|(_, raw)| raw)
}

/// [`unwrap`], with the type the envelope names.
pub fn open(body: &[u8]) -> Result<(TypeMeta, Vec<u8>), DecodeError> {
    let Some(rest) = body.strip_prefix(&MAGIC) else {
        return Err(DecodeError(format!(
            "the body does not start with the Kubernetes protobuf prefix k8s\\0 ({} bytes)",
            body.len()
        )));
    };
    let unknown = Unknown::decode(rest)
        .map_err(|e| DecodeError(format!("the envelope does not decode: {e}")))?;
    if let Some(encoding) = unknown
        .content_encoding
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        return Err(DecodeError(format!(
            "the object has a content encoding gates does not read: {encoding}"
        )));
    }
    Ok((
        unknown.type_meta.unwrap_or_default(),
        unknown.raw.unwrap_or_default(),
    ))
}

/// Decode one message, naming it when it does not decode.
pub fn decode<M: Message + Default>(raw: &[u8], name: &str) -> Result<M, DecodeError> {
    M::decode(raw).map_err(|e| DecodeError(format!("the {name} does not decode: {e}")))
}

/// The `Status` of an error answer in protobuf, as kube's client reads one in JSON.
pub fn status(body: &[u8], code: u16) -> Option<kube::core::Status> {
    let raw = unwrap(body).ok()?;
    let s = Status::decode(raw.as_slice()).ok()?;
    Some(kube::core::Status {
        status: match s.status.as_deref() {
            Some("Success") => Some(kube::core::response::StatusSummary::Success),
            Some("Failure") => Some(kube::core::response::StatusSummary::Failure),
            _ => None,
        },
        message: s.message.unwrap_or_default(),
        reason: s.reason.unwrap_or_default(),
        code: s.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(code),
        ..kube::core::Status::default()
    })
}

/// Wrap an encoded object as the API server does: for the tests and the lab.
pub fn wrap(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    unknown.encode(&mut body).expect("a Vec grows");
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_without_the_kubernetes_prefix_is_refused_naming_it() {
        let err = unwrap(b"{\"kind\":\"PodList\"}").unwrap_err();
        assert!(
            err.0
                .contains("does not start with the Kubernetes protobuf prefix"),
            "{err}"
        );
    }

    #[test]
    fn an_envelope_round_trips_and_a_compressed_one_is_refused() {
        let body = wrap("v1", "PodList", vec![1, 2, 3]);
        assert_eq!(&body[..4], b"k8s\0");
        assert_eq!(unwrap(&body).unwrap(), vec![1, 2, 3]);
        let mut gz = MAGIC.to_vec();
        Unknown {
            raw: Some(vec![1]),
            content_encoding: Some("gzip".into()),
            ..Unknown::default()
        }
        .encode(&mut gz)
        .unwrap();
        assert!(unwrap(&gz).unwrap_err().0.contains("gzip"));
    }

    #[test]
    fn a_truncated_envelope_is_an_error_not_a_panic() {
        let body = wrap("v1", "PodList", vec![9; 40]);
        for cut in 4..body.len() {
            let _ = unwrap(&body[..cut]);
        }
        assert!(unwrap(&body[..body.len() - 3]).is_err());
    }

    #[test]
    fn an_empty_continue_token_ends_the_list_and_a_negative_count_is_no_hint() {
        let meta = ListMeta {
            resource_version: Some("42".into()),
            continue_: Some(String::new()),
            remaining_item_count: Some(-1),
        };
        assert_eq!(meta.next(), None);
        assert_eq!(meta.revision().as_deref(), Some("42"));
        assert_eq!(meta.remaining(), 0);
    }

    #[test]
    fn an_error_status_in_protobuf_keeps_its_code_and_message() {
        let mut raw = Vec::new();
        Status {
            status: Some("Failure".into()),
            message: Some("pods is forbidden".into()),
            reason: Some("Forbidden".into()),
            code: Some(403),
        }
        .encode(&mut raw)
        .unwrap();
        let status = status(&wrap("v1", "Status", raw), 500).expect("a status");
        assert_eq!(status.code, 403);
        assert_eq!(status.message, "pods is forbidden");
        assert_eq!(status.reason, "Forbidden");
    }
}
