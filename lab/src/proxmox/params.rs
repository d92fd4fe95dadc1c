//! Request parameters: the query string merged with a form or JSON body, checked against a small
//! per-endpoint schema the way Proxmox's JSONSchema does (`research/proxmox.md` §1.7): booleans
//! must be `0`/`1` in forms, unknown parameters are rejected, errors name the parameter.

use std::collections::BTreeMap;

/// Parameter kinds the lab's endpoints use.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Boolean,
    Integer,
    String,
    /// One of the listed values.
    Enum(&'static [&'static str]),
}

/// One schema entry.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
    /// Only `root@pam` may pass it (tokens never are `root@pam`).
    pub root_only: bool,
}

pub const fn opt(name: &'static str, kind: Kind) -> Param {
    Param {
        name,
        kind,
        required: false,
        root_only: false,
    }
}

pub const fn req(name: &'static str, kind: Kind) -> Param {
    Param {
        name,
        kind,
        required: true,
        root_only: false,
    }
}

pub const fn root(name: &'static str, kind: Kind) -> Param {
    Param {
        name,
        kind,
        required: false,
        root_only: true,
    }
}

/// Parameter values as strings (JSON scalars converted: `true` → `1`).
pub type Values = BTreeMap<String, String>;

/// Parses `application/x-www-form-urlencoded` text into values (later keys win).
pub fn parse_form(text: &[u8], into: &mut Values) {
    for (k, v) in form_urlencoded::parse(text) {
        into.insert(k.into_owned(), v.into_owned());
    }
}

/// Parses a JSON object body; `Err` with a message when it is not an object of scalars.
pub fn parse_json(body: &[u8], into: &mut Values) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("unable to parse JSON body - {e}"))?;
    let obj = value
        .as_object()
        .ok_or_else(|| "JSON body must be an object".to_string())?;
    for (k, v) in obj {
        let text = match v {
            serde_json::Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => continue,
            other => other.to_string(),
        };
        into.insert(k.clone(), text);
    }
    Ok(())
}

/// Checks values against `schema`; returns the per-parameter errors (empty when valid).
pub fn validate(values: &Values, schema: &[Param]) -> BTreeMap<String, String> {
    let mut errors = BTreeMap::new();
    for (name, value) in values {
        let Some(param) = schema.iter().find(|p| p.name == name) else {
            errors.insert(
                name.clone(),
                "property is not defined in schema and the schema does not allow additional properties".into(),
            );
            continue;
        };
        if param.root_only {
            errors.insert(name.clone(), "Only root may use this option.".into());
            continue;
        }
        let ok = match param.kind {
            Kind::Boolean => value == "0" || value == "1",
            Kind::Integer => {
                let digits = value.strip_prefix('-').unwrap_or(value);
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
            }
            Kind::String => true,
            Kind::Enum(allowed) => allowed.contains(&value.as_str()),
        };
        if !ok {
            let msg = match param.kind {
                Kind::Boolean => format!("type check ('boolean') failed - got '{value}'"),
                Kind::Integer => format!("type check ('integer') failed - got '{value}'"),
                Kind::Enum(allowed) => format!(
                    "value '{value}' does not have a value in the enumeration '{}'",
                    allowed.join(", ")
                ),
                Kind::String => String::new(),
            };
            errors.insert(name.clone(), msg);
        }
    }
    for param in schema.iter().filter(|p| p.required) {
        if !values.contains_key(param.name) {
            errors.insert(
                param.name.to_string(),
                "property is missing and it is not optional".into(),
            );
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &[Param] = &[
        opt("forceStop", Kind::Boolean),
        opt("timeout", Kind::Integer),
        req("command", Kind::Enum(&["reboot", "shutdown"])),
        root("skiplock", Kind::Boolean),
    ];

    #[test]
    fn form_booleans_must_be_zero_or_one() {
        let mut v = Values::new();
        parse_form(b"forceStop=true&command=shutdown", &mut v);
        let errors = validate(&v, SCHEMA);
        assert_eq!(
            errors.get("forceStop").map(String::as_str),
            Some("type check ('boolean') failed - got 'true'")
        );
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn json_booleans_are_accepted() {
        let mut v = Values::new();
        parse_json(
            br#"{"forceStop": true, "timeout": 30, "command": "reboot"}"#,
            &mut v,
        )
        .expect("json");
        assert!(validate(&v, SCHEMA).is_empty());
    }

    #[test]
    fn unknown_missing_root_only_and_enum_errors() {
        let mut v = Values::new();
        parse_form(b"bogus=1&skiplock=1&timeout=x", &mut v);
        let errors = validate(&v, SCHEMA);
        assert!(errors["bogus"].starts_with("property is not defined in schema"));
        assert_eq!(errors["skiplock"], "Only root may use this option.");
        assert_eq!(errors["timeout"], "type check ('integer') failed - got 'x'");
        assert_eq!(
            errors["command"],
            "property is missing and it is not optional"
        );
        let mut v = Values::new();
        parse_form(b"command=halt", &mut v);
        assert_eq!(
            validate(&v, SCHEMA)["command"],
            "value 'halt' does not have a value in the enumeration 'reboot, shutdown'"
        );
    }
}
