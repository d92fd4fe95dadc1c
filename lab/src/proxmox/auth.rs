//! API-token authentication (`research/proxmox.md` §1.3, §1.5): the header
//! `Authorization: PVEAPIToken=USER@REALM!TOKENID=SECRET` (or with a space instead of the first
//! `=`), URI-unescaped, split at the last `=`.

use http::HeaderMap;
use http::header::{AUTHORIZATION, COOKIE};

/// One API token the lab accepts.
#[derive(Clone)]
pub struct ApiToken {
    /// `user@realm!tokenid`, e.g. `gates@pve!lab`.
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("id", &self.id)
            .field("secret", &"[secret]")
            .finish()
    }
}

/// Result of checking a request's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// A valid token; carries its id (`user@realm!tokenid`).
    Token(String),
    /// No credentials at all: 401 `No ticket`.
    Missing,
    /// Credentials that do not verify (or a ticket, which the lab does not issue):
    /// 401 `Authentication failed!`.
    Invalid,
}

/// Checks the request headers against the accepted tokens.
pub fn authenticate(headers: &HeaderMap, tokens: &[ApiToken]) -> Auth {
    let token_value = headers
        .get_all(AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(extract_token);
    let Some(raw) = token_value else {
        let has_ticket = headers
            .get_all(COOKIE)
            .iter()
            .chain(headers.get_all(AUTHORIZATION).iter())
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("PVEAuthCookie"));
        return if has_ticket {
            Auth::Invalid
        } else {
            Auth::Missing
        };
    };
    let value = percent_decode(raw);
    let Some((id, secret)) = value.rsplit_once('=') else {
        return Auth::Invalid;
    };
    if !valid_token_id(id) {
        return Auth::Invalid;
    }
    let ok = tokens
        .iter()
        .any(|t| t.id == id && constant_time_eq(t.secret.as_bytes(), secret.as_bytes()));
    if ok {
        Auth::Token(id.to_string())
    } else {
        Auth::Invalid
    }
}

/// The value after `PVEAPIToken=` / `PVEAPIToken ` up to a `;`, when the word starts the header
/// or follows whitespace.
fn extract_token(header: &str) -> Option<&str> {
    let mut search = 0;
    while let Some(pos) = header[search..].find("PVEAPIToken") {
        let start = search + pos;
        let preceded_ok = start == 0
            || header[..start]
                .chars()
                .next_back()
                .is_some_and(char::is_whitespace);
        let after = &header[start + "PVEAPIToken".len()..];
        if preceded_ok && (after.starts_with('=') || after.starts_with(' ')) {
            let value = &after[1..];
            return Some(value.split(';').next().unwrap_or(""));
        }
        search = start + 1;
    }
    None
}

/// `user@realm!name` with Proxmox's character rules: user without whitespace, `:` or `/`;
/// realm and token name start with a letter and are at least two characters.
fn valid_token_id(id: &str) -> bool {
    let Some((userrealm, name)) = id.split_once('!') else {
        return false;
    };
    let Some((user, realm)) = userrealm.rsplit_once('@') else {
        return false;
    };
    let word = |s: &str| {
        s.len() >= 2
            && s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    !user.is_empty()
        && !user.contains(|c: char| c.is_whitespace() || c == ':' || c == '/')
        && word(realm)
        && word(name)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Decodes `%XX` escapes; invalid escapes are kept literally.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex_val(bytes[i + 1]), hex_val(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(value).expect("header"));
        h
    }

    fn tokens() -> Vec<ApiToken> {
        vec![ApiToken {
            id: "gates@pve!lab".into(),
            secret: "aaaa-bbbb".into(),
        }]
    }

    #[test]
    fn accepts_equals_and_space_forms_split_at_last_equals() {
        let ok = Auth::Token("gates@pve!lab".into());
        for header in [
            "PVEAPIToken=gates@pve!lab=aaaa-bbbb",
            "PVEAPIToken gates@pve!lab=aaaa-bbbb",
            "PVEAPIToken=gates%40pve%21lab=aaaa-bbbb",
            "Other x; PVEAPIToken=gates@pve!lab=aaaa-bbbb",
        ] {
            assert_eq!(authenticate(&headers(header), &tokens()), ok, "{header}");
        }
        // Split at the last '=': the id would be "gates@pve!lab=aaaa", not a valid token id.
        assert_eq!(
            authenticate(&headers("PVEAPIToken=gates@pve!lab=aaaa=bbbb"), &tokens()),
            Auth::Invalid
        );
    }

    #[test]
    fn missing_wrong_and_malformed_credentials() {
        assert_eq!(authenticate(&HeaderMap::new(), &tokens()), Auth::Missing);
        assert_eq!(
            authenticate(&headers("Bearer abc"), &tokens()),
            Auth::Missing
        );
        assert_eq!(
            authenticate(&headers("PVEAPIToken=gates@pve!lab:aaaa-bbbb"), &tokens()),
            Auth::Invalid
        );
        assert_eq!(
            authenticate(&headers("PVEAPIToken=gates@pve!lab=wrong"), &tokens()),
            Auth::Invalid
        );
        assert_eq!(
            authenticate(&headers("PVEAuthCookie=PVE:root@pam:1234::sig"), &tokens()),
            Auth::Invalid
        );
    }
}
