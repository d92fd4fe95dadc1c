//! `gates snapshot`: one `v1` `List` with every object `check` reads, readable again with
//! `--snapshot`. Annotations on the List record which kinds were collected and why others
//! were absent, so an offline run gives the same verdicts as the live one.

use serde_json::{Value, json};

use super::kube;
use super::snapshot::{ABSENT_ANNOTATION, COLLECTED_ANNOTATION};
use crate::config::Environment;

pub async fn write_live(env: &Environment) -> Result<String, String> {
    let results = kube::collect_raw(env).await?;
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
            Err(reason) => absent.push(format!("{name}={}", reason.replace('\n', " "))),
        }
    }
    if collected.is_empty() {
        return Err(format!("nothing could be collected: {}", absent.join("; ")));
    }
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {
            "annotations": {
                COLLECTED_ANNOTATION: collected.join(","),
                ABSENT_ANNOTATION: absent.join("\n"),
            }
        },
        "items": Value::Array(items),
    });
    serde_json::to_string_pretty(&list).map_err(|err| err.to_string())
}
