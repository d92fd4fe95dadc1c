//! The API token: its id (`USER@REALM!TOKENID`) and its secret, which never appears in
//! `Debug`, `Display`, errors or logs.

use std::fmt;
use std::path::Path;

use reqwest::header::HeaderValue;

use super::error::ProxmoxError;

/// A token secret. Read it from an environment variable or a file, never from YAML.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(String);

impl TokenSecret {
    /// Wraps a secret held in memory (trimmed).
    pub fn new(secret: impl Into<String>) -> Result<Self, ProxmoxError> {
        let s = secret.into().trim().to_string();
        if s.is_empty() {
            return Err(ProxmoxError::Secret {
                from: "value".into(),
                reason: "the token secret is empty".into(),
            });
        }
        if s.chars().any(|c| c.is_control()) {
            return Err(ProxmoxError::Secret {
                from: "value".into(),
                reason: "the token secret contains control characters".into(),
            });
        }
        Ok(Self(s))
    }

    /// Reads the secret from environment variable `var`.
    pub fn from_env(var: &str) -> Result<Self, ProxmoxError> {
        let from = format!("environment variable {var}");
        let value = std::env::var(var).map_err(|e| ProxmoxError::Secret {
            from: from.clone(),
            reason: match e {
                std::env::VarError::NotPresent => "not set".to_string(),
                std::env::VarError::NotUnicode(_) => "not valid UTF-8".to_string(),
            },
        })?;
        Self::new(value).map_err(|e| e.with_secret_source(&from))
    }

    /// Reads the secret from the first line of a file (as the lab writes `proxmox-token`).
    pub fn from_file(path: &Path) -> Result<Self, ProxmoxError> {
        let from = format!("file {}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| ProxmoxError::Secret {
            from: from.clone(),
            reason: e.kind().to_string(),
        })?;
        let first = text.lines().next().unwrap_or_default();
        Self::new(first).map_err(|e| e.with_secret_source(&from))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSecret(<redacted>)")
    }
}

impl fmt::Display for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A Proxmox VE API token: `USER@REALM!TOKENID` plus its secret.
#[derive(Clone)]
pub struct ApiToken {
    token_id: String,
    secret: TokenSecret,
}

impl ApiToken {
    /// Checks the id's shape the way pveproxy does (user `[^\s:/]+`, realm and token name
    /// starting with a letter, at least two characters of `[A-Za-z0-9.\-_]`).
    pub fn new(token_id: &str, secret: TokenSecret) -> Result<Self, ProxmoxError> {
        validate_token_id(token_id).map_err(|reason| ProxmoxError::InvalidSettings {
            reason: format!("token_id {token_id:?}: {reason}"),
        })?;
        Ok(Self {
            token_id: token_id.to_string(),
            secret,
        })
    }

    pub fn token_id(&self) -> &str {
        &self.token_id
    }

    /// The `Authorization` header value, marked sensitive so HTTP logging hides it.
    pub(crate) fn header_value(&self) -> Result<HeaderValue, ProxmoxError> {
        let mut value = HeaderValue::from_str(&format!(
            "PVEAPIToken={}={}",
            self.token_id,
            self.secret.expose()
        ))
        .map_err(|_| ProxmoxError::Secret {
            from: "value".into(),
            reason: "the token secret is not a valid HTTP header value".into(),
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiToken")
            .field("token_id", &self.token_id)
            .field("secret", &self.secret)
            .finish()
    }
}

fn realm_like(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && s.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// What is wrong with the shape of a token id (`USER@REALM!TOKENID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenIdError {
    #[error("expected USER@REALM!TOKENID (no '!')")]
    NoBang,
    #[error("expected USER@REALM!TOKENID (no '@')")]
    NoAt,
    #[error("invalid user part")]
    User,
    #[error("invalid realm")]
    Realm,
    #[error("invalid token name (letters, digits, . - _; starts with a letter)")]
    TokenName,
}

fn validate_token_id(id: &str) -> Result<(), TokenIdError> {
    let (user_realm, token) = id.split_once('!').ok_or(TokenIdError::NoBang)?;
    let (user, realm) = user_realm.rsplit_once('@').ok_or(TokenIdError::NoAt)?;
    if user.is_empty()
        || user
            .chars()
            .any(|c| c.is_whitespace() || c == ':' || c == '/')
    {
        return Err(TokenIdError::User);
    }
    if !realm_like(realm) {
        return Err(TokenIdError::Realm);
    }
    if !realm_like(token) {
        return Err(TokenIdError::TokenName);
    }
    Ok(())
}
