//! `gates snapshot`: one `v1` `List` with every object `check` reads, readable again with
//! `--snapshot`. Annotations on the List record which kinds were collected and why others
//! were absent, and what the Talos API, the API endpoint and Proxmox answered, so an offline
//! run gives the same verdicts as the live one.

use serde_json::{Value, json};

use super::infra_record::{INFRA_ANNOTATION, InfraRecord};
use super::kinds::Kind;
use super::snapshot::{ABSENT_ANNOTATION, COLLECTED_ANNOTATION};
use super::{api_part, kube, proxmox_place, proxmox_read, talos_part};
use crate::config::{Config, Environment};
use crate::state::Collected;

/// Why no snapshot was written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotWriteError {
    /// No Kubernetes client could be built (kubeconfig, context, TLS material).
    #[error(transparent)]
    NoClient(super::kube::KubeError),
    #[error(
        "the snapshot of {env} would be incomplete, so nothing was written; could not read:\n  {}\n  hint: fix the cause and retry, or pass --allow-incomplete to write it anyway (the missing parts are recorded and give error verdicts)",
        missing.join("\n  ")
    )]
    Incomplete { env: String, missing: Vec<String> },
    #[error("nothing could be collected: {}", absent.join("; "))]
    NothingCollected { absent: Vec<String> },
    #[error("cannot encode the snapshot: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The snapshot as text; refused when a part could not be read, unless `allow_incomplete`
/// (the missing parts are then recorded in the file).
pub async fn write_live(
    config: &Config,
    env: &Environment,
    allow_incomplete: bool,
) -> Result<String, SnapshotWriteError> {
    let collected_at = chrono::Utc::now();
    let client = kube::client(env)
        .await
        .map_err(SnapshotWriteError::NoClient)?;
    // Proxmox is read beside the Kubernetes lists, as `check` reads it; only matching its
    // VMs to the nodes waits for the node list.
    let (results, talos, api, identity, proxmox) = tokio::join!(
        kube::collect_raw(env, client.clone()),
        talos_part(env),
        api_part(env),
        super::deadline::within(
            env,
            "reading the cluster identity",
            super::identity::live(env, Some(&client)),
            |_| super::identity::offline(env)
        ),
        proxmox_read(config, env)
    );
    // The VMs are matched to the node list just read, typed as `check` types it.
    let nodes: Collected<Vec<std::sync::Arc<k8s_openapi::api::core::v1::Node>>> = results
        .iter()
        .find(|(kind, _)| *kind == Kind::Node)
        .map_or_else(
            || Collected::Absent("nodes were not listed".into()),
            |(kind, r)| super::raw::typed(*kind, r.clone()),
        );
    let proxmox = proxmox_place(proxmox, nodes.present().map(Vec::as_slice));
    let missing = super::completeness::missing_parts(&results, &talos, &api, &proxmox);
    if !missing.is_empty() && !allow_incomplete {
        return Err(SnapshotWriteError::Incomplete {
            env: env.name.clone(),
            missing,
        });
    }
    // Provenance from the same answers `check` will type from this file.
    let mut typed = crate::state::State::empty(
        crate::state::Source::Live {
            context: String::new(),
        },
        collected_at,
    );
    typed.nodes = nodes.clone();
    typed.talos = talos.clone();
    typed.cluster_identity = identity;
    let provenance = crate::state::provenance::Provenance::of(env, &typed, collected_at);
    let provenance = serde_json::to_string(&provenance)?;
    let infra = InfraRecord {
        talos: (&talos).into(),
        api: (&api).into(),
        proxmox: (&proxmox).into(),
    };
    let infra = serde_json::to_string(&infra)?;
    let mut items = Vec::new();
    let mut collected = Vec::new();
    let mut absent = Vec::new();
    for (kind, result) in results {
        let name = kind.coordinates().resource_name();
        match result {
            Ok(objects) => {
                collected.push(name);
                items.extend(objects);
            }
            Err(reason) => absent.push(format!("{name}={}", reason.0.replace('\n', " "))),
        }
    }
    if collected.is_empty() {
        return Err(SnapshotWriteError::NothingCollected { absent });
    }
    let metadata = json!({
        "annotations": {
            COLLECTED_ANNOTATION: collected.join(","),
            ABSENT_ANNOTATION: absent.join("\n"),
            INFRA_ANNOTATION: infra,
            super::snapshot::PROVENANCE_ANNOTATION: provenance,
            super::completeness::INCOMPLETE_ANNOTATION: missing.join("\n"),
        }
    });
    Ok(list_text(&metadata, &items)?)
}

/// A `v1` `List` with its metadata indented and each item compact on a line of its own.
///
/// Pretty-printing a hundred thousand pods made the file two-thirds whitespace (403 MiB
/// against 243 MiB at 5,000 nodes), and a reader holds the whole text while it types the
/// objects. One object per line keeps the file readable with `grep`, `jq` and a diff
/// per object.
pub fn list_text(metadata: &Value, items: &[Value]) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(1024 + items.len() * 1024);
    out.extend_from_slice(b"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"metadata\": ");
    serde_json::to_writer_pretty(&mut out, metadata)?;
    out.extend_from_slice(b",\n  \"items\": [");
    for (i, item) in items.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"\n" } else { b",\n" });
        serde_json::to_writer(&mut out, item)?;
    }
    out.extend_from_slice(if items.is_empty() {
        b"]\n}\n"
    } else {
        b"\n  ]\n}\n"
    });
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_one_object_per_line_and_reads_back_as_the_same_json() {
        let metadata = json!({"annotations": {"gates.adr/collected": "nodes/v1"}});
        let items = vec![
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cp-1", "labels": {"a": "b"}}}),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cp-2"}}),
        ];
        let text = list_text(&metadata, &items).expect("written");
        let lines: Vec<&str> = text.lines().collect();
        let object_lines: Vec<&&str> = lines
            .iter()
            .filter(|l| l.starts_with("{\"apiVersion\":\"v1\",\"kind\":\"Node\""))
            .collect();
        assert_eq!(object_lines.len(), 2, "{text}");
        assert!(object_lines[0].contains("\"name\":\"cp-1\""), "{text}");
        let read: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(
            read,
            json!({"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": items})
        );
    }

    #[test]
    fn an_empty_list_is_valid_json() {
        let text = list_text(&json!({}), &[]).expect("written");
        let read: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(read["items"], json!([]));
    }
}
