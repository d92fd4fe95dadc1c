//! Metrics: the textfile and the Pushgateway get the same OpenMetrics text, which
//! prometheus_client's parsers read.

use super::*;

/// A one-request HTTP server on 127.0.0.1 that answers `status` and hands back the request.
fn one_request_server(status: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = stream.read(&mut buf).unwrap();
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let body = if status.starts_with('2') {
            ""
        } else {
            "bad metric\n"
        };
        write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    (url, handle)
}

#[test]
fn check_metrics_go_to_the_textfile_and_the_pushgateway_and_parse_as_openmetrics() {
    let (url, server) = one_request_server("200 OK");
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("gates.prom");
    let (out, _reports) = check(
        "staging",
        STAGING_TODAY,
        &[
            "--metrics",
            metrics.to_str().unwrap(),
            "--pushgateway",
            &url,
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let request = server.join().unwrap();
    let (head, body) = request.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("PUT /metrics/job/gates/environment/staging/command/check HTTP/1.1"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let text = std::fs::read_to_string(&metrics).unwrap();
    assert_eq!(body, text, "the same text pushed and written");
    let samples = parse_metrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let gate1 = [
        ("environment", "staging"),
        ("gate", "1"),
        ("verdict", "fail"),
    ];
    assert_eq!(
        sample(&samples, "gates_gate_verdict", &gate1).unwrap()["value"],
        1.0
    );
    let trial = [
        ("trial", "gate1::staging::control-plane-nodes"),
        ("verdict", "fail"),
    ];
    assert_eq!(
        sample(&samples, "gates_trial_verdict", &trial).unwrap()["value"],
        1.0
    );
    assert!(sample(&samples, "gates_check_duration_seconds", &[]).is_some());
    assert!(!dir.path().join("gates.prom.tmp").exists());
}

#[test]
fn a_pushgateway_that_refuses_the_push_is_an_error_naming_its_answer() {
    let (url, server) = one_request_server("400 Bad Request");
    let (out, _reports) = check("staging", STAGING_TODAY, &["--pushgateway", &url]);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("answered 400 Bad Request: bad metric"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn metrics_text_a_parser_rejects_is_caught_by_the_parser_used_here() {
    // The parser is strict: a sample outside its family is refused.
    let bad = "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n# EOF\n";
    assert!(parse_metrics(bad).is_err());
    let text = gates::output::report::metrics::chaos(
        &serde_json::from_str(
            &std::fs::read_to_string(
                root().join("fixtures/reports/chaos-lab-20261201T140155Z.json"),
            )
            .unwrap(),
        )
        .unwrap(),
    );
    let samples = parse_metrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let probe = [
        ("probe", "ingress::whoami.lab.internal"),
        ("bound", "longest"),
    ];
    assert_eq!(
        sample(&samples, "gates_chaos_outage_budget_seconds", &probe).unwrap()["value"],
        0.825
    );
}
