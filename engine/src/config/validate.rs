//! Everything about an environment that can be known without a network, checked at load and
//! reported all at once: numbers in range, URLs with the right scheme and a host, files that
//! must exist, exactly one way to get a secret and to trust a certificate. Each error points
//! at its node in the file and uses the file's own key names.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Environment;
use super::spans::Node;
use gates_core::config::ConfigError;

/// Every problem of one environment.
pub fn environment(env: &Environment, tree: &Node) -> Vec<ConfigError> {
    let mut v = Check {
        file: &env.file,
        tree,
        errors: Vec::new(),
    };
    margins(&mut v, env);
    prometheus_load(&mut v, env);
    // kube.page_size: every u32 means something (0 reads each list unpaged).
    for (i, url) in env.ingress.urls.iter().enumerate() {
        v.whole(
            &["ingress", "urls", &i.to_string(), "expect_status"],
            u64::from(url.expect_status),
            100..=599,
            "an HTTP status, e.g. 200",
        );
    }
    ranges(&mut v, env);
    nodes_and_endpoints(&mut v, env);
    talos(&mut v, env);
    if let Some(proxmox) = &env.proxmox {
        proxmox_section(&mut v, proxmox);
    }
    v.errors
}

/// The capacity margins: each a fraction, and together leaving something for workloads.
fn margins(v: &mut Check<'_>, env: &Environment) {
    for (key, value, hint) in [
        ("margin", env.capacity.margin, "a third is 0.3334"),
        (
            "rebuild_margin",
            env.capacity.rebuild_margin,
            "0 keeps nothing for rebuilds; a tenth is 0.1",
        ),
    ] {
        // NaN and the infinities are not in the range either.
        if !(0.0..1.0).contains(&value) {
            v.error(
                &["capacity", key],
                format!("capacity.{key} must be a fraction from 0 to below 1, not {value:?}"),
                hint,
            );
        }
    }
    let (margin, rebuild) = (env.capacity.margin, env.capacity.rebuild_margin);
    if (0.0..1.0).contains(&margin) && (0.0..1.0).contains(&rebuild) && margin + rebuild >= 1.0 {
        v.error(
            &["capacity", "rebuild_margin"],
            format!(
                "capacity.margin {margin} and capacity.rebuild_margin {rebuild} leave nothing for workloads: gate 5 keeps both free, so their sum must be below 1"
            ),
            "the ADR's third and a tenth for rebuilds: margin 0.3334, rebuild_margin 0.1",
        );
    }
}

/// Every duration within what it can mean, and Proxmox's concurrency.
fn ranges(v: &mut Check<'_>, env: &Environment) {
    const MS: Duration = Duration::from_millis(1);
    const SECOND: Duration = Duration::from_secs(1);
    const HOUR: Duration = Duration::from_secs(3600);
    const DAY: Duration = Duration::from_secs(24 * 3600);
    let mut durations = vec![
        (vec!["kube", "timeout"], env.kube.timeout, MS..=HOUR),
        (vec!["deadline"], env.deadline, SECOND..=DAY),
    ];
    if let Some(talos) = &env.talos {
        durations.push((vec!["talos", "timeout"], talos.timeout, MS..=HOUR));
    }
    if let Some(prometheus) = &env.capacity.prometheus {
        durations.extend([
            (
                vec!["capacity", "prometheus", "timeout"],
                prometheus.timeout,
                MS..=HOUR,
            ),
            (
                vec!["capacity", "prometheus", "step"],
                prometheus.step,
                SECOND..=DAY,
            ),
            (
                vec!["capacity", "prometheus", "window"],
                prometheus.window,
                SECOND..=DAY * 366,
            ),
        ]);
    }
    if let Some(proxmox) = &env.proxmox {
        durations.push((vec!["proxmox", "timeout"], proxmox.timeout, MS..=HOUR));
        v.whole(
            &["proxmox", "concurrency"],
            proxmox.concurrency as u64,
            1..=256,
            "VM configs read at once; the default is 16",
        );
    }
    if let Some(chaos) = &env.chaos {
        durations.extend([
            (
                vec!["chaos", "sample_interval"],
                chaos.sample_interval,
                MS..=HOUR,
            ),
            (vec!["chaos", "outage"], chaos.outage, SECOND..=DAY),
            (
                vec!["chaos", "recovery_timeout"],
                chaos.recovery_timeout,
                SECOND..=DAY,
            ),
            (
                vec!["chaos", "report_max_age"],
                chaos.report_max_age,
                SECOND..=DAY * 366,
            ),
        ]);
        let budgets = &chaos.budgets;
        for (probe, budget) in [
            ("api", budgets.api),
            ("ingress", budgets.ingress),
            ("workloads", budgets.workloads),
            ("etcd", budgets.etcd),
        ] {
            for (part, value) in [("longest", budget.longest), ("total", budget.total)] {
                durations.push((
                    vec!["chaos", "budgets", probe, part],
                    value,
                    Duration::ZERO..=DAY,
                ));
            }
        }
    }
    for (path, value, range) in durations {
        v.duration(&path, value.0, range);
    }
}

/// The topology's numbers and labels, the kubeconfig, the API endpoint and ingress URLs.
fn nodes_and_endpoints(v: &mut Check<'_>, env: &Environment) {
    if env.nodes.control_planes == 0 {
        v.error(
            &["nodes", "control_planes"],
            "nodes.control_planes must be at least 1",
            "the ADR's topology has 3",
        );
    }
    if env.nodes.host_label.trim().is_empty() {
        v.error(
            &["nodes", "host_label"],
            "nodes.host_label is empty",
            "name the node label that holds the Proxmox host, e.g. topology.kubernetes.io/zone",
        );
    }
    if let Some(path) = &env.kube.kubeconfig {
        v.file_exists(&["kube", "kubeconfig"], "kube.kubeconfig", path);
    }
    if let Some(api) = &env.api {
        v.url(
            &["api", "endpoint"],
            "api.endpoint",
            &api.endpoint,
            &["https"],
            "https://10.0.50.10:6443",
        );
    }
    for (i, url) in env.ingress.urls.iter().enumerate() {
        let index = i.to_string();
        v.url(
            &["ingress", "urls", &index, "url"],
            "ingress.urls[].url",
            &url.url,
            &["http", "https"],
            "https://whoami.example.internal/",
        );
        if let Some(ca) = &url.ca_file {
            v.file_exists(
                &["ingress", "urls", &index, "ca_file"],
                "ingress.urls[].ca_file",
                ca,
            );
        }
    }
}

fn talos(v: &mut Check<'_>, env: &Environment) {
    if let Some(talos) = &env.talos {
        if let Some(path) = &talos.talosconfig {
            v.file_exists(&["talos", "talosconfig"], "talos.talosconfig", path);
        }
        if talos.endpoints.is_empty() {
            v.error(
                &["talos", "endpoints"],
                "talos.endpoints is empty",
                "list every control-plane address, e.g. [10.0.50.11, 10.0.50.12, 10.0.50.13]",
            );
        }
    }
}

/// Exactly one secret and one trust, named domains, https URLs, files that exist, a token id.
fn proxmox_section(v: &mut Check<'_>, proxmox: &super::ProxmoxAccess) {
    let sources = [
        proxmox.token_secret_env.is_some(),
        proxmox.token_secret_file.is_some(),
    ];
    if sources.iter().filter(|s| **s).count() != 1 {
        v.error(
            &["proxmox"],
            "proxmox needs exactly one of token_secret_env and token_secret_file",
            "the secret itself never goes in this file",
        );
    }
    let trusts = [
        proxmox.ca_file.is_some(),
        proxmox.fingerprint.is_some(),
        proxmox.insecure_tls,
    ];
    if trusts.iter().filter(|s| **s).count() != 1 {
        v.error(
            &["proxmox"],
            "proxmox needs exactly one of ca_file, fingerprint and insecure_tls: true",
            "ca_file verifies every host's certificate; a fingerprint pins one host",
        );
    }
    for (host, domains) in &proxmox.hosts {
        for (key, value) in [("switch", &domains.switch), ("power", &domains.power)] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                v.error(
                    &["proxmox", "hosts", host, key],
                    format!("proxmox.hosts.{host}.{key} is empty"),
                    "name the switch or power feed (e.g. sw-a, pdu-1), or leave the key out",
                );
            }
        }
    }
    v.url(
        &["proxmox", "url"],
        "proxmox.url",
        &proxmox.url,
        &["https"],
        "https://HOST:8006",
    );
    for (i, url) in proxmox.fallback_urls.iter().enumerate() {
        v.url(
            &["proxmox", "fallback_urls", &i.to_string()],
            "proxmox.fallback_urls",
            url,
            &["https"],
            "https://HOST:8006",
        );
    }
    if let Some(path) = &proxmox.ca_file {
        v.file_exists(&["proxmox", "ca_file"], "proxmox.ca_file", path);
    }
    if let Some(path) = &proxmox.token_secret_file {
        v.file_exists(
            &["proxmox", "token_secret_file"],
            "proxmox.token_secret_file",
            path,
        );
    }
    if proxmox.token_id.trim().is_empty() {
        v.error(
            &["proxmox", "token_id"],
            "proxmox.token_id is empty",
            "USER@REALM!TOKENID, e.g. gates@pve!staging",
        );
    }
}

/// `capacity.basis: prometheus` and its section: one without the other, a quantile outside
/// 0 to 1, a window shorter than its step or with more steps than Prometheus answers, a share
/// of gaps outside 0 to 1, a label Prometheus cannot have, an empty query, a missing CA file.
fn prometheus_load(v: &mut Check<'_>, env: &Environment) {
    use gates_core::config::CapacityBasis;
    let capacity = &env.capacity;
    let Some(p) = &capacity.prometheus else {
        if capacity.basis == CapacityBasis::Prometheus {
            v.error(
                &["capacity", "basis"],
                "capacity.basis is prometheus but capacity.prometheus is missing",
                "add capacity.prometheus.url, e.g. `prometheus: {url: http://prometheus-operated.monitoring:9090}`",
            );
        }
        return;
    };
    if capacity.basis != CapacityBasis::Prometheus {
        v.error(
            &["capacity", "prometheus"],
            "capacity.prometheus is set but capacity.basis is not prometheus, so it would be ignored",
            "set capacity.basis: prometheus, or remove capacity.prometheus",
        );
    }
    v.url(
        &["capacity", "prometheus", "url"],
        "capacity.prometheus.url",
        &p.url,
        &["http", "https"],
        "http://prometheus-operated.monitoring:9090",
    );
    prometheus_window(v, p);
    prometheus_queries(v, p);
    prometheus_credentials(v, p);
}

/// The statistic, the share of gaps allowed, and a window Prometheus can answer.
fn prometheus_window(v: &mut Check<'_>, p: &gates_core::config::PrometheusLoad) {
    use gates_core::config::LoadStatistic;
    if let LoadStatistic::Quantile(q) = p.quantile {
        // NaN is not in the range either.
        if !(q > 0.0 && q <= 1.0) {
            v.error(
                &["capacity", "prometheus", "quantile"],
                format!("capacity.prometheus.quantile must be above 0 and at most 1, not {q:?}"),
                "0.95 judges on the 95th percentile of the window; `max` on its peak",
            );
        }
    }
    if !(0.0..1.0).contains(&p.max_gap_share) {
        v.error(
            &["capacity", "prometheus", "max_gap_share"],
            format!(
                "capacity.prometheus.max_gap_share must be a fraction from 0 to below 1, not {:?}",
                p.max_gap_share
            ),
            "the share of the window's steps a node may lack; 0.05 allows a twentieth",
        );
    }
    let (window, step) = (p.window.0, p.step.0);
    if !step.is_zero() && window < step {
        v.error(
            &["capacity", "prometheus", "window"],
            format!(
                "capacity.prometheus.window {} is shorter than capacity.prometheus.step {}: the window would hold a single value",
                p.window, p.step
            ),
            "a week at five minutes: window: 7d, step: 5m",
        );
    } else if !step.is_zero() && window.as_millis() / step.as_millis() > 11_000 {
        // Prometheus refuses a range query of more than 11,000 steps (web/api/v1/api.go).
        v.error(
            &["capacity", "prometheus", "step"],
            format!(
                "capacity.prometheus.window {} at capacity.prometheus.step {} is {} steps; Prometheus answers at most 11,000",
                p.window,
                p.step,
                window.as_millis() / step.as_millis()
            ),
            "a longer step: a week at one minute is 10,080 steps",
        );
    }
}

/// The node label and the queries.
fn prometheus_queries(v: &mut Check<'_>, p: &gates_core::config::PrometheusLoad) {
    let label = &p.node_label;
    let mut chars = label.chars();
    let label_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !label_ok {
        v.error(
            &["capacity", "prometheus", "node_label"],
            format!("capacity.prometheus.node_label `{label}` is not a Prometheus label name"),
            "the label of the queries' result that holds the node name; kube-prometheus-stack's kubelet series carry `node`",
        );
    }
    for (key, query) in [("cpu", &p.queries.cpu), ("memory", &p.queries.memory)] {
        if query.trim().is_empty() {
            v.error(
                &["capacity", "prometheus", "queries", key],
                format!("capacity.prometheus.queries.{key} is empty"),
                "leave the key out for the default, which the README shows",
            );
        }
    }
}

/// One way to prove who gates is, files that exist, and a CA for an https URL.
fn prometheus_credentials(v: &mut Check<'_>, p: &gates_core::config::PrometheusLoad) {
    if p.username.is_some() != p.password_file.is_some() {
        v.error(
            &["capacity", "prometheus"],
            "capacity.prometheus.username and capacity.prometheus.password_file go together (basic auth)",
            "name the user and the file that holds the password, or neither",
        );
    }
    if p.password_file.is_some() && p.bearer_token_file.is_some() {
        v.error(
            &["capacity", "prometheus", "bearer_token_file"],
            "capacity.prometheus has both basic auth (password_file) and bearer_token_file; a request carries one",
            "keep the one your Prometheus (or the proxy in front of it) checks",
        );
    }
    for (key, file) in [
        ("password_file", &p.password_file),
        ("bearer_token_file", &p.bearer_token_file),
    ] {
        if let Some(path) = file {
            v.file_exists(
                &["capacity", "prometheus", key],
                &format!("capacity.prometheus.{key}"),
                path,
            );
        }
    }
    if let Some(path) = &p.ca_file {
        v.file_exists(
            &["capacity", "prometheus", "ca_file"],
            "capacity.prometheus.ca_file",
            path,
        );
    } else if p
        .url
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("https:")
    {
        // The client trusts no system roots: without a CA no certificate can be verified.
        v.error(
            &["capacity", "prometheus", "url"],
            format!(
                "capacity.prometheus.url `{}` is https but capacity.prometheus.ca_file is not set, so its certificate cannot be verified",
                p.url
            ),
            "set ca_file to the CA (PEM) that signed Prometheus's certificate; gates trusts no system roots",
        );
    }
}

struct Check<'a> {
    file: &'a Path,
    tree: &'a Node,
    errors: Vec<ConfigError>,
}

impl Check<'_> {
    /// An error at the node of `path` (or its nearest existing parent).
    fn error(&mut self, path: &[&str], message: impl Into<String>, hint: impl Into<String>) {
        let key = path
            .iter()
            .filter(|p| p.parse::<usize>().is_err())
            .copied()
            .collect::<Vec<_>>()
            .join(".");
        self.keyed(path, &key, message, hint);
    }

    fn keyed(
        &mut self,
        path: &[&str],
        key: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let at = (0..=path.len())
            .rev()
            .find_map(|n| self.tree.at(&path[..n]))
            .map(Node::position);
        self.errors.push(
            ConfigError::new(self.file, message)
                .at(at)
                .key(key)
                .hint(hint),
        );
    }

    /// A whole number outside its range is an error naming the range.
    fn whole(&mut self, path: &[&str], value: u64, range: RangeInclusive<u64>, hint: &str) {
        if !range.contains(&value) {
            let key = dotted(path);
            self.error(
                path,
                format!(
                    "{key} must be from {} to {}, not {value}",
                    range.start(),
                    range.end()
                ),
                hint,
            );
        }
    }

    /// A duration outside its range is an error naming the range.
    fn duration(&mut self, path: &[&str], value: Duration, range: RangeInclusive<Duration>) {
        if !range.contains(&value) {
            let key = dotted(path);
            let human = humantime::format_duration;
            self.error(
                path,
                format!(
                    "{key} must be from {} to {}, not {}",
                    human(*range.start()),
                    human(*range.end()),
                    human(value)
                ),
                "write it like \"500ms\", \"90s\" or \"5m\"",
            );
        }
    }

    fn url(&mut self, path: &[&str], key: &str, url: &str, schemes: &[&str], example: &str) {
        let problem = match reqwest::Url::parse(url) {
            Err(_) if !url.contains("://") => Some(format!("{key} `{url}` has no scheme")),
            Err(err) => Some(format!("{key} `{url}` is not a URL: {err}")),
            Ok(parsed) if !schemes.contains(&parsed.scheme()) => Some(format!(
                "{key} `{url}` uses {}, but only {} is allowed here",
                parsed.scheme(),
                schemes.join(" or ")
            )),
            Ok(parsed) if parsed.host_str().is_none_or(str::is_empty) => {
                Some(format!("{key} `{url}` has no host"))
            }
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            self.error(path, problem, format!("write it like {example}"));
        }
    }

    fn file_exists(&mut self, path: &[&str], key: &str, file: &Path) {
        let resolved: PathBuf = super::paths::resolve(self.file, file);
        if !resolved.is_file() {
            self.error(
                path,
                format!(
                    "{key} `{}` does not exist ({})",
                    file.display(),
                    resolved.display()
                ),
                "relative paths are relative to this file's directory",
            );
        }
    }
}

/// `ingress.urls[].expect_status`: a path in the words of the file, list indices as `[]`.
fn dotted(path: &[&str]) -> String {
    let mut out = String::new();
    for part in path {
        if part.parse::<usize>().is_ok() {
            out.push_str("[]");
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
    }
    out
}
