//! Which state a list reads, from its `resourceVersion` and `resourceVersionMatch`, with the
//! errors the real API server gives: 422 for combinations its ListOptions validation
//! forbids, 400 for a resourceVersion that is not a number, 410 for an exact revision that
//! was compacted away and 504 for one the server has not reached yet.

use std::collections::HashMap;

use serde_json::json;

use super::status::{bad_request, status};
use crate::net::Body;
use hyper::Response;

/// How fresh a list must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// No resourceVersion (or "0"): the current state.
    Latest,
    /// `resourceVersion=N` (match unset or `NotOlderThan`): at least as new as N.
    NotOlderThan(u64),
    /// `resourceVersionMatch=Exact`: the state at exactly N.
    Exact(u64),
}

impl Read {
    /// The revision the server must have reached to answer.
    pub fn needs(self) -> Option<u64> {
        match self {
            Read::Latest => None,
            Read::NotOlderThan(n) | Read::Exact(n) => Some(n),
        }
    }
}

/// Why the API server refuses a list's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 422: ListOptions validation failed (the joined field errors).
    Invalid(String),
    /// 400: a value that cannot be parsed.
    BadRequest(String),
}

impl Refusal {
    pub fn response(&self) -> Response<Body> {
        match self {
            Refusal::Invalid(errors) => status(
                422,
                "Invalid",
                &format!("ListOptions.meta.k8s.io \"\" is invalid: {errors}"),
                Some(json!({"group": "meta.k8s.io", "kind": "ListOptions"})),
            ),
            Refusal::BadRequest(message) => bad_request(message),
        }
    }
}

/// The read a list asks for, or why the API server refuses it.
pub fn read_of(query: &HashMap<String, String>) -> Result<Read, Refusal> {
    let given = |k: &str| query.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let rv = given("resourceVersion");
    let matching = given("resourceVersionMatch");
    let cont = given("continue");
    let mut errors = Vec::new();
    if let Some(m) = matching {
        if rv.is_none() {
            errors.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
                    .to_string(),
            );
        }
        if cont.is_some() {
            errors.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"
                    .to_string(),
            );
        }
        if m != "Exact" && m != "NotOlderThan" {
            errors.push(format!(
                "resourceVersionMatch: Unsupported value: {m:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
            ));
        }
        if m == "Exact" && rv == Some("0") {
            errors.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
                    .to_string(),
            );
        }
    }
    if !errors.is_empty() {
        let joined = if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        };
        return Err(Refusal::Invalid(joined));
    }
    let Some(rv) = rv else {
        return Ok(Read::Latest);
    };
    let Ok(n) = rv.parse::<u64>() else {
        return Err(Refusal::BadRequest(format!(
            "resourceVersion: Invalid value: {rv:?}: invalid resource version"
        )));
    };
    if cont.is_some() && n != 0 {
        return Err(Refusal::BadRequest(
            "specifying resource version is not allowed when using continue".into(),
        ));
    }
    Ok(match matching {
        Some("Exact") => Read::Exact(n),
        _ if n == 0 => Read::Latest,
        _ => Read::NotOlderThan(n),
    })
}

/// 504 for a resourceVersion the server has not reached (after waiting for it).
pub fn too_large(asked: u64, current: u64) -> Response<Body> {
    status(
        504,
        "Timeout",
        &format!("Timeout: Too large resource version: {asked}, current: {current}"),
        Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        })),
    )
}

/// 410 for an exact revision older than the history reaches.
pub fn expired() -> Response<Body> {
    status(
        410,
        "Expired",
        "The resourceVersion for the provided list is too old.",
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn list_options_are_validated_as_the_api_server_does() {
        assert_eq!(read_of(&q(&[])).ok(), Some(Read::Latest));
        assert_eq!(
            read_of(&q(&[("resourceVersion", "0")])).ok(),
            Some(Read::Latest)
        );
        assert_eq!(
            read_of(&q(&[("resourceVersion", "7")])).ok(),
            Some(Read::NotOlderThan(7))
        );
        assert_eq!(
            read_of(&q(&[
                ("resourceVersion", "7"),
                ("resourceVersionMatch", "Exact")
            ]))
            .ok(),
            Some(Read::Exact(7))
        );
        let code = |pairs: &[(&str, &str)]| {
            read_of(&q(pairs))
                .err()
                .map(|r| r.response().status().as_u16())
        };
        assert_eq!(code(&[("resourceVersionMatch", "Exact")]), Some(422));
        assert_eq!(
            code(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]),
            Some(422)
        );
        assert_eq!(
            code(&[("resourceVersion", "3"), ("resourceVersionMatch", "Newest")]),
            Some(422)
        );
        assert_eq!(code(&[("resourceVersion", "abc")]), Some(400));
    }
}
