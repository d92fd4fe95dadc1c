//! Reading one configuration file: its YAML tree with positions ([`super::spans`]), then the
//! typed value from that tree ([`super::node_de`]). Every error becomes a [`ConfigError`]
//! at the offending node, in the YAML's words, with the nearest valid choice as a hint.

use std::path::Path;

use gates_core::config::{ConfigError, nearest};

use super::node_de::{DeError, DeErrorKind, from_node};
use super::spans::{self, Node, NodeValue};

/// The tree of a file, or every reason it is not YAML (tabs in indentation, syntax) or not
/// one document.
pub fn parse(file: &Path, text: &str) -> Result<Node, Vec<ConfigError>> {
    let mut documents = documents(file, text)?.into_iter();
    let Some(first) = documents.next().filter(|n| n.value != NodeValue::Null) else {
        return Err(vec![
            ConfigError::new(file, "is empty: it holds no YAML mapping")
                .hint("write its keys, or remove the file"),
        ]);
    };
    if let Some(second) = documents.next() {
        return Err(vec![
            ConfigError::new(
                file,
                "a second YAML document: a configuration file holds one",
            )
            .at(Some(second.position()))
            .hint("remove the `---` and merge the keys into the first document"),
        ]);
    }
    Ok(first)
}

fn documents(file: &Path, text: &str) -> Result<Vec<Node>, Vec<ConfigError>> {
    let tabs = spans::tabs_in_indentation(text);
    if !tabs.is_empty() {
        return Err(tabs
            .into_iter()
            .map(|at| {
                ConfigError::new(file, "a tab in the indentation")
                    .at(Some(at))
                    .hint("YAML indents with spaces only; replace the tab with spaces")
            })
            .collect());
    }
    spans::documents(text).map_err(|err| {
        let at = err
            .location()
            .map(|l| (l.line() as usize, l.column() as usize))
            .filter(|(line, _)| *line > 0);
        let message = err.to_string();
        // The parser appends the position in words; it is printed as file:line:column.
        let message = match message.find(" at line ") {
            Some(i) => message[..i].to_string(),
            None => message,
        };
        vec![ConfigError::new(file, format!("not valid YAML: {message}")).at(at)]
    })
}

/// The typed value of a tree, or the error at its node.
pub fn typed<T: serde::de::DeserializeOwned>(file: &Path, tree: &Node) -> Result<T, ConfigError> {
    from_node(tree).map_err(|err| convert(file, err))
}

fn convert(file: &Path, err: DeError) -> ConfigError {
    let place = if err.path.is_empty() {
        String::new()
    } else {
        format!(" in {}", err.path)
    };
    let error = ConfigError::new(file, format!("{err}{place}")).at(err.at);
    match err.kind {
        DeErrorKind::UnknownKey { key, valid } => suggest(error.key(key.clone()), &key, &valid),
        DeErrorKind::UnknownValue { value, valid } => {
            suggest(error.key(err.path.clone()), &value, &valid)
        }
        DeErrorKind::MissingKey(key) => error.key(key).hint(format!("add the key `{key}`")),
        DeErrorKind::WrongType { .. } | DeErrorKind::Other(_) => {
            let key = err.path.rsplit('.').next().unwrap_or_default().to_string();
            if key.is_empty() {
                error
            } else {
                error.key(key)
            }
        }
    }
}

fn suggest(error: ConfigError, word: &str, valid: &[&str]) -> ConfigError {
    match nearest(word, valid.iter().copied()) {
        Some(best) if !word.is_empty() => error.hint(format!(
            "did you mean `{best}`? (valid: {})",
            valid.join(", ")
        )),
        _ if !valid.is_empty() => error.hint(format!("valid: {}", valid.join(", "))),
        _ => error,
    }
}
