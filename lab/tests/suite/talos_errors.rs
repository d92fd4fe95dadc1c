//! Wrong Talos requests get the errors real apid and machined give: unregistered COSI types
//! and namespaces are PermissionDenied, COSI honours ListOptions, `nodes` metadata is refused
//! where apid refuses it, and a numeric target is dialled, not looked up.

use crate::talos_support::proto::cosi::resource::{
    IdQuery, LabelQuery, LabelTerm, ListOptions, ListRequest, Resource, label_term::Operation,
};
use crate::talos_support::{StateClient, metadata, node_ip, start};
use tonic::Code;
use tonic::transport::Channel;

const ADDRESSES: &str = "AddressStatuses.net.talos.dev";

fn list_request(namespace: &str, kind: &str, options: Option<ListOptions>) -> ListRequest {
    ListRequest {
        namespace: namespace.into(),
        r#type: kind.into(),
        options,
    }
}

async fn list(
    client: &mut StateClient<Channel>,
    req: tonic::Request<ListRequest>,
) -> Result<Vec<String>, tonic::Status> {
    let mut stream = client.list(req).await?.into_inner();
    let mut out = Vec::new();
    while let Some(msg) = stream.message().await? {
        out.extend(msg.resource.iter().map(id));
    }
    Ok(out)
}

fn id(r: &Resource) -> String {
    r.metadata
        .as_ref()
        .map(|m| m.id.clone())
        .unwrap_or_default()
}

fn term(key: &str, op: Operation, value: &[&str]) -> LabelTerm {
    LabelTerm {
        key: key.into(),
        op: op as i32,
        value: value.iter().map(|v| v.to_string()).collect(),
        invert: false,
    }
}

#[tokio::test]
async fn cosi_refuses_types_and_namespaces_talos_does_not_register() {
    let nodes = start(249).await;
    let mut cp1 = nodes.state_client(1, &nodes.admin).await;
    let err = list(
        &mut cp1,
        tonic::Request::new(list_request("network", "Nonsense.example.com", None)),
    )
    .await
    .expect_err("an unknown type");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(
        err.message(),
        "resource type \"Nonsense.example.com\" is not supported"
    );
    let err = list(
        &mut cp1,
        tonic::Request::new(list_request("nowhere", ADDRESSES, None)),
    )
    .await
    .expect_err("an unknown namespace");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(err.message(), "namespace \"nowhere\" is not supported");
    // Types are matched case-insensitively, as machined looks them up lower-cased.
    let lower = list(
        &mut cp1,
        tonic::Request::new(list_request(
            "network",
            "addressstatuses.net.talos.dev",
            None,
        )),
    )
    .await
    .expect("a registered type");
    assert_eq!(lower.len(), 2, "{lower:?}");
    // A registered type in a registered namespace that holds nothing lists nothing.
    let none = list(
        &mut cp1,
        tonic::Request::new(list_request("cluster", "Members.cluster.talos.dev", None)),
    )
    .await
    .expect("registered");
    assert!(none.is_empty());
}

#[tokio::test]
async fn cosi_list_honours_id_and_label_queries() {
    let nodes = start(251).await;
    let mut cp1 = nodes.state_client(1, &nodes.admin).await;
    let by_id = list(
        &mut cp1,
        tonic::Request::new(list_request(
            "network",
            ADDRESSES,
            Some(ListOptions {
                label_query: None,
                id_query: Some(IdQuery {
                    regexp: "^eth0/".into(),
                }),
            }),
        )),
    )
    .await
    .expect("id query");
    assert_eq!(by_id, [format!("eth0/{}/24", nodes.ip(1))]);
    // Address statuses carry no labels: an equality term keeps nothing, NOT_EXISTS keeps all.
    let labelled = |terms: Vec<LabelTerm>| {
        tonic::Request::new(list_request(
            "network",
            ADDRESSES,
            Some(ListOptions {
                label_query: Some(LabelQuery { terms }),
                id_query: None,
            }),
        ))
    };
    let equal = list(
        &mut cp1,
        labelled(vec![term("talos.dev/role", Operation::Equal, &["vip"])]),
    )
    .await
    .expect("label query");
    assert!(equal.is_empty(), "{equal:?}");
    let absent = list(
        &mut cp1,
        labelled(vec![term("talos.dev/role", Operation::NotExists, &[])]),
    )
    .await
    .expect("label query");
    assert_eq!(absent.len(), 2, "{absent:?}");
    let bad = list(
        &mut cp1,
        tonic::Request::new(list_request(
            "network",
            ADDRESSES,
            Some(ListOptions {
                label_query: None,
                id_query: Some(IdQuery { regexp: "(".into() }),
            }),
        )),
    )
    .await
    .expect_err("a broken regexp");
    assert_eq!(bad.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn nodes_metadata_is_refused_for_cosi_and_a_worker_does_not_forward() {
    let nodes = start(250).await;
    let mut cp1 = nodes.state_client(1, &nodes.admin).await;
    let mut req = tonic::Request::new(list_request("network", ADDRESSES, None));
    req.metadata_mut().append("nodes", metadata(nodes.ip(2)));
    let err = list(&mut cp1, req).await.expect_err("one-to-many COSI");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.message(),
        "one-2-many proxying is not supported for method /cosi.resource.State/List"
    );

    // The worker (node 4) answers for itself but forwards nothing, whole call refused.
    let mut worker = nodes.state_client(4, &nodes.admin).await;
    let mut own = tonic::Request::new(list_request("network", ADDRESSES, None));
    own.metadata_mut().insert("node", metadata(nodes.ip(4)));
    assert_eq!(list(&mut worker, own).await.expect("itself").len(), 2);
    let mut other = tonic::Request::new(list_request("network", ADDRESSES, None));
    other.metadata_mut().insert("node", metadata(nodes.ip(1)));
    let err = list(&mut worker, other).await.expect_err("forwarding");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(err.message(), "no request forwarding");
    let mut machine = nodes.admin_client(4).await;
    let mut fan = tonic::Request::new(());
    fan.metadata_mut().append("nodes", metadata(nodes.ip(1)));
    fan.metadata_mut().append("nodes", metadata(nodes.ip(4)));
    let err = machine.version(fan).await.expect_err("a worker fans out");
    assert_eq!(err.code(), Code::PermissionDenied);

    // A numeric target nobody has is dialled (and times out), never looked up in DNS. It lies
    // in the nodes' claimed subnet, where no lab serves.
    let nobody = node_ip(nodes.subnet, 99);
    let mut cp = nodes.admin_client(1).await;
    let mut req = tonic::Request::new(());
    req.metadata_mut().append("nodes", metadata(nobody));
    let reply = cp.version(req).await.expect("aggregated").into_inner();
    let error = &reply.messages[0].metadata.as_ref().expect("metadata").error;
    assert!(
        error.contains(&format!("dial tcp {nobody}:50000: i/o timeout")),
        "{error}"
    );
    assert!(!error.contains("no such host"), "{error}");
}
