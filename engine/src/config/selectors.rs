//! Label selectors written in configuration files (`selector:`, `serviceSelector:`,
//! `matchLabels:`): a label key is never empty, so `selector: {"": ""}` is an error at its
//! key instead of a selector that matches nothing.

use std::path::Path;

use gates_core::config::ConfigError;

use super::spans::{Node, NodeValue};

/// Every empty label key in a selector of `tree`.
pub fn empty_label_keys(file: &Path, tree: &Node) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    walk(file, tree, "", &mut errors);
    errors
}

fn is_selector(key: &str) -> bool {
    key == "selector" || key.ends_with("Selector") || key == "matchLabels"
}

fn walk(file: &Path, node: &Node, path: &str, errors: &mut Vec<ConfigError>) {
    match &node.value {
        NodeValue::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(file, item, &format!("{path}[{i}]"), errors);
            }
        }
        NodeValue::Map(entries) => {
            for (key, value) in entries {
                let name = key.as_text().unwrap_or_default();
                let child = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                if is_selector(&name)
                    && let NodeValue::Map(labels) = &value.value
                {
                    for (label, _) in labels {
                        if label.as_text().is_some_and(|l| l.trim().is_empty()) {
                            errors.push(
                                ConfigError::new(file, format!("an empty label key in {child}"))
                                    .at(Some(label.position()))
                                    .key(child.clone())
                                    .hint("name the label, e.g. app.kubernetes.io/name: traefik"),
                            );
                        }
                    }
                }
                walk(file, value, &child, errors);
            }
        }
        _ => {}
    }
}
