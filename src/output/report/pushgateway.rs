//! `--pushgateway URL`: the run's metrics pushed to a Prometheus Pushgateway, for runs (CI
//! jobs) that no scraper can reach. One group per job, environment and command, replaced by
//! each push (HTTP PUT), so a dashboard shows the newest run and never a mix of two.

use base64::Engine as _;

/// `https://pgw:9091/metrics/job/gates/environment/staging/command/check`; a value with
/// characters a path segment cannot carry is sent base64url-encoded (`name@base64/…`), as
/// the Pushgateway's API allows.
pub fn group_url(base: &str, grouping: &[(&str, &str)]) -> String {
    let mut url = format!("{}/metrics", base.trim_end_matches('/'));
    for (name, value) in grouping {
        let plain = !value.is_empty()
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if plain {
            url.push_str(&format!("/{name}/{value}"));
        } else {
            let encoded = base64::engine::general_purpose::URL_SAFE.encode(value.as_bytes());
            // An empty value is `=` in the Pushgateway's base64 form.
            let encoded = if encoded.is_empty() {
                "=".to_string()
            } else {
                encoded
            };
            url.push_str(&format!("/{name}@base64/{encoded}"));
        }
    }
    url
}

/// Why the metrics did not reach the Pushgateway. URLs are shown without their user
/// information, so a password in `--pushgateway` never reaches a log.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("cannot build an HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("cannot push the metrics to {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the Pushgateway at {url} answered {status}: {first_line}")]
    Refused {
        url: String,
        status: reqwest::StatusCode,
        first_line: String,
    },
}

/// The URL as it may be shown: without `user:password@`.
fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_string(),
    }
}

/// PUT the text to the group; an answer other than 2xx is an error with the body's first line.
pub async fn push(base: &str, grouping: &[(&str, &str)], text: String) -> Result<(), PushError> {
    let url = group_url(base, grouping);
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(std::time::Duration::from_secs(30));
    if url.starts_with("https://") {
        for der in rustls_native_certs::load_native_certs().certs {
            if let Ok(cert) = reqwest::Certificate::from_der(&der) {
                builder = builder.add_root_certificate(cert);
            }
        }
    }
    let client = builder.build().map_err(PushError::Client)?;
    let response = client
        .put(&url)
        // The classic text format: the OpenMetrics `# EOF` line is a comment there.
        .header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        .body(text)
        .send()
        .await
        .map_err(|source| PushError::Unreachable {
            url: shown(&url),
            source: source.without_url(),
        })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let body = response.text().await.unwrap_or_default();
    Err(PushError::Refused {
        url: shown(&url),
        status,
        first_line: body.lines().next().unwrap_or("").trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_pushgateway_url_is_never_shown() {
        assert_eq!(
            shown("https://ci:s3cret@push.example:9091/metrics/job/gates"),
            "https://push.example:9091/metrics/job/gates"
        );
        assert_eq!(shown("http://127.0.0.1:9091"), "http://127.0.0.1:9091");
    }

    #[test]
    fn plain_values_stay_readable_and_others_are_base64url() {
        assert_eq!(
            group_url(
                "http://127.0.0.1:9091/",
                &[("job", "gates"), ("environment", "lab-production")]
            ),
            "http://127.0.0.1:9091/metrics/job/gates/environment/lab-production"
        );
        assert_eq!(
            group_url("http://p", &[("environment", "a/b"), ("x", "")]),
            "http://p/metrics/environment@base64/YS9i/x@base64/="
        );
    }
}
