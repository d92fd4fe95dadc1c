use std::fs;
use std::path::Path;

use super::{Config, ConfigErrors};

const STAGING: &str = "kube:\n  context: admin@staging\nnodes:\n  control_planes: 3\n";

const GATE: &str = "gate: 2\ntitle: Controllers.\nenvironments: [staging]\nchecks:\n  - kind: replicated-controller\n    name: coredns\n    selector: { k8s-app: kube-dns }\n";

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn load(env: &str, gate: &str) -> Result<Config, ConfigErrors> {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "environments/staging.yaml", env);
    write(dir.path(), "adr-007/2.yaml", gate);
    Config::load(dir.path(), &[])
}

fn only_error(result: Result<Config, ConfigErrors>) -> super::ConfigError {
    let errors = result.expect_err("the configuration should be rejected");
    assert_eq!(errors.0.len(), 1, "{errors}");
    errors.0.into_iter().next().unwrap()
}

#[test]
fn valid_configuration_loads() {
    let config = load(STAGING, GATE).unwrap();
    let env = config.environment("staging").unwrap();
    assert_eq!(env.kube.context.as_deref(), Some("admin@staging"));
    assert_eq!(env.nodes.host_label, "topology.kubernetes.io/zone");
    assert_eq!(config.gates_for(env).count(), 1);
}

#[test]
fn unknown_environment_key_names_line_key_and_nearest() {
    let error = only_error(load(
        "kube:\n  context: a\nnodes:\n  control_plane: 3\n",
        GATE,
    ));
    assert_eq!(error.key.as_deref(), Some("control_plane"));
    assert_eq!(error.position, Some((4, 3)));
    let text = error.to_string();
    assert!(
        text.contains("staging.yaml:4:3: unknown key `control_plane`"),
        "{text}"
    );
    assert!(text.contains("did you mean `control_planes`?"), "{text}");
}

#[test]
fn wrong_type_names_the_place() {
    let error = only_error(load("nodes:\n  control_planes: three\n", GATE));
    let text = error.to_string();
    assert!(text.contains("staging.yaml:2:"), "{text}");
    assert!(text.contains("control_planes"), "{text}");
}

#[test]
fn unknown_check_kind_suggests_the_nearest_kind() {
    let gate = GATE.replace("replicated-controller", "replicated-controler");
    let error = only_error(load(STAGING, &gate));
    let text = error.to_string();
    assert!(
        text.contains("2.yaml:5:11: unknown value `replicated-controler`"),
        "{text}"
    );
    assert!(
        text.contains("did you mean `replicated-controller`?"),
        "{text}"
    );
}

#[test]
fn unknown_check_parameter_names_its_own_line() {
    let gate = format!("{GATE}    min_replica: 2\n");
    let error = only_error(load(STAGING, &gate));
    let text = error.to_string();
    assert!(
        text.contains("2.yaml:8:5: unknown key `min_replica`"),
        "{text}"
    );
    assert!(text.contains("did you mean `min_replicas`?"), "{text}");
}

#[test]
fn unknown_environment_in_gate_suggests_a_known_one() {
    let gate = GATE.replace("[staging]", "[stagin]");
    let error = only_error(load(STAGING, &gate));
    let text = error.to_string();
    assert!(
        text.contains("2.yaml:3:16: unknown environment `stagin`"),
        "{text}"
    );
    assert!(text.contains("did you mean `staging`?"), "{text}");
}

#[test]
fn bad_duration_explains_the_format() {
    let error = only_error(load("kube:\n  timeout: ten seconds\n", GATE));
    let text = error.to_string();
    assert!(text.contains("staging.yaml:2:"), "{text}");
    assert!(text.contains("\"90s\""), "{text}");
}

#[test]
fn margin_outside_a_fraction_is_rejected() {
    let error = only_error(load("capacity:\n  margin: 33\n", GATE));
    assert_eq!(error.key.as_deref(), Some("capacity.margin"));
    // The offending node: the value 33.
    assert_eq!(error.position, Some((2, 11)));
}

#[test]
fn like_makes_an_environment_take_another_ones_gates() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "environments/staging.yaml", STAGING);
    write(dir.path(), "adr-007/2.yaml", GATE);
    let extra = tempfile::tempdir().unwrap();
    write(extra.path(), "lab.yaml", "like: staging\n");
    let config = Config::load(dir.path(), &[extra.path().to_path_buf()]).unwrap();
    let lab = config.environment("lab").unwrap();
    assert_eq!(config.gates_for(lab).count(), 1);
}

#[test]
fn unknown_environment_on_the_command_line_suggests_one() {
    let config = load(STAGING, GATE).unwrap();
    let err = config.environment("stagign").unwrap_err();
    assert_eq!(err.nearest.as_deref(), Some("staging"));
    let message = err.to_string();
    assert!(message.contains("did you mean `staging`?"), "{message}");
}

#[test]
fn shipped_configuration_is_valid() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("gates");
    let config = Config::load(&root, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.environments.contains_key("staging"));
    assert!(config.environments.contains_key("production"));
}

#[test]
fn an_extra_environment_directory_overrides_same_named_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "environments/staging.yaml", STAGING);
    write(dir.path(), "adr-007/2.yaml", GATE);
    let extra = tempfile::tempdir().unwrap();
    write(extra.path(), "staging.yaml", "kube:\n  context: other\n");
    let config = Config::load(dir.path(), &[extra.path().to_path_buf()]).unwrap();
    let env = config.environment("staging").unwrap();
    assert_eq!(env.kube.context.as_deref(), Some("other"));
    assert!(env.file.starts_with(extra.path()));
}

#[test]
fn a_fallback_proxmox_url_without_https_names_its_line() {
    let error = only_error(load(
        "proxmox:\n  url: https://pve1:8006\n  fallback_urls: [http://pve2:8006]\n  token_id: a@pve!b\n  token_secret_env: T\n  insecure_tls: true\n",
        GATE,
    ));
    assert_eq!(error.key.as_deref(), Some("proxmox.fallback_urls"));
    assert_eq!(error.position, Some((3, 19)));
    assert!(error.to_string().contains("http://pve2:8006"), "{error}");
}

/// Load on another thread, so a hang fails the test instead of holding it forever.
fn load_within(env: &str, gate: &str, limit: std::time::Duration) -> Result<Config, ConfigErrors> {
    let (env, gate) = (env.to_string(), gate.to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(load(&env, &gate));
    });
    rx.recv_timeout(limit)
        .expect("loading the configuration did not finish: it hangs")
}

#[test]
fn an_empty_enum_value_is_an_error_not_a_hang() {
    let limit = std::time::Duration::from_secs(20);
    let gate = "gate: 2\ntitle: Controllers.\nenvironments: [staging]\nchecks:\n  - kind: \"\"\n";
    let errors = load_within(STAGING, gate, limit).expect_err("an empty kind is rejected");
    assert!(errors.to_string().contains("unknown value ``"), "{errors}");
    let env = format!("{STAGING}capacity:\n  basis: \"\"\n");
    let errors = load_within(&env, GATE, limit).expect_err("an empty basis is rejected");
    assert!(errors.to_string().contains("unknown value ``"), "{errors}");
}

#[test]
fn a_trial_name_longer_than_the_bound_is_rejected_at_load() {
    let long = "x".repeat(65_536);
    let gate = format!(
        "gate: 2\ntitle: Controllers.\nenvironments: [staging]\nchecks:\n  - kind: replicated-controller\n    name: {long}\n    selector: {{ a: b }}\n"
    );
    let error = only_error(load(STAGING, &gate));
    assert!(
        error.message.contains("65536 characters long; at most 100"),
        "{error}"
    );
}

#[test]
fn duplicate_trial_names_are_all_reported_at_once() {
    let gate = format!(
        "{GATE}  - kind: replicated-controller\n    name: coredns\n    selector: {{ a: b }}\n  - kind: replicated-controller\n    name: 'has space'\n    selector: {{ a: b }}\n"
    );
    let errors = load(STAGING, &gate).expect_err("rejected");
    let text = errors.to_string();
    assert_eq!(errors.0.len(), 2, "{text}");
    assert!(
        text.contains("checks 1 and 2 of gate 2 are both `replicated-controller::coredns`"),
        "{text}"
    );
    assert!(text.contains("\"has space\""), "{text}");
}

#[test]
fn an_unknown_value_points_at_its_own_node_not_the_first_match_in_the_file() {
    let gate = "gate: 2\ntitle: Controllers.\nenvironments: [staging]\nchecks:\n  - selector: {app: distinct-host}\n    kind: distinct-host\n";
    let error = only_error(load(STAGING, gate));
    assert_eq!(error.position, Some((6, 11)), "{error}");
    assert!(
        error
            .to_string()
            .contains("unknown value `distinct-host` in checks[0]"),
        "{error}"
    );
    assert!(
        error.to_string().contains("did you mean `distinct-hosts`?"),
        "{error}"
    );
}

#[test]
fn every_problem_of_an_environment_is_reported_at_once_in_yaml_words() {
    let env = "nodes:\n  control_planes: 0\n  host_label: ''\napi:\n  endpoint: 10.0.50.10:6443\ncapacity:\n  margin: 2\nproxmox:\n  url: https://pve1:8006\n  token_id: a@pve!b\n  token_secret_env: T\n  ca_file: missing-ca.pem\ntalos:\n  context: staging\n  talosconfig: missing-talosconfig\n  endpoints: [10.0.50.11]\n";
    let errors = load(env, GATE).expect_err("rejected");
    let text = errors.to_string();
    for expected in [
        "staging.yaml:2:19: nodes.control_planes must be at least 1",
        "staging.yaml:3:15: nodes.host_label is empty",
        "staging.yaml:5:13: api.endpoint `10.0.50.10:6443`",
        "staging.yaml:7:11: capacity.margin must be a fraction",
        "staging.yaml:12:12: proxmox.ca_file `missing-ca.pem` does not exist",
        "staging.yaml:15:16: talos.talosconfig `missing-talosconfig` does not exist",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    assert_eq!(errors.0.len(), 6, "{text}");
}

#[test]
fn an_endpoint_without_a_scheme_says_so() {
    let env = format!("{STAGING}api:\n  endpoint: 10.0.50.10\n");
    let error = only_error(load(&env, GATE));
    assert!(error.message.contains("has no scheme"), "{error}");
    assert!(
        error.to_string().contains("https://10.0.50.10:6443"),
        "{error}"
    );
}

#[test]
fn a_tab_in_the_indentation_is_named_with_its_line() {
    let error = only_error(load("nodes:\n\tcontrol_planes: 3\n", GATE));
    assert_eq!(error.position, Some((2, 1)));
    assert!(
        error.message.contains("a tab in the indentation"),
        "{error}"
    );
    assert!(error.to_string().contains("spaces"), "{error}");
}

#[test]
fn a_wrong_type_is_said_in_yaml_words_not_rust_types() {
    let error = only_error(load("nodes:\n  control_planes: three\n", GATE));
    let text = error.to_string();
    assert!(text.contains("staging.yaml:2:19"), "{text}");
    assert!(text.contains("a whole number"), "{text}");
    assert!(!text.contains("usize"), "{text}");
}

/// Every error of loading `env` beside the shipped-like gate, as text.
fn all_errors(env: &str) -> (Vec<super::ConfigError>, String) {
    let errors = load(env, GATE).expect_err("the environment should be rejected");
    let text = errors.to_string();
    (errors.0, text)
}

#[test]
fn a_sequence_where_nodes_wants_a_mapping_is_an_error_at_its_line() {
    let error = only_error(load("nodes: [1, 2]\n", GATE));
    assert_eq!(error.key.as_deref(), Some("nodes"), "{error}");
    assert_eq!(error.position, Some((1, 8)), "{error}");
    assert!(
        error
            .to_string()
            .contains("staging.yaml:1:8: a list where a mapping of keys is expected in nodes"),
        "{error}"
    );
}

#[test]
fn an_empty_list_for_nodes_or_capacity_is_an_error_not_the_defaults() {
    for (env, key) in [("nodes: []\n", "nodes"), ("capacity: []\n", "capacity")] {
        let error = only_error(load(env, GATE));
        assert_eq!(error.key.as_deref(), Some(key), "{error}");
        assert!(
            error.to_string().contains(&format!(
                "staging.yaml:1:{}: a list where a mapping of keys is expected in {key}",
                key.len() + 3
            )),
            "{error}"
        );
    }
}

#[test]
fn a_list_where_a_nested_mapping_belongs_is_an_error_too() {
    let error = only_error(load("chaos:\n  budgets:\n    api: [1s, 2s]\n", GATE));
    assert_eq!(error.key.as_deref(), Some("api"), "{error}");
    assert_eq!(error.position, Some((3, 10)), "{error}");
    assert!(
        error.to_string().contains("in chaos.budgets.api"),
        "{error}"
    );
}

#[test]
fn a_list_where_a_check_belongs_is_an_error_not_read_by_position() {
    let gate = "gate: 2\ntitle: Controllers.\nenvironments: [staging]\nchecks:\n  - [replicated-controller, coredns]\n";
    let error = only_error(load(STAGING, gate));
    assert_eq!(error.position, Some((5, 5)), "{error}");
    assert!(error.to_string().contains("a list where"), "{error}");
}

#[test]
fn an_empty_environment_file_is_refused_by_name() {
    for text in ["", "\n", "# only a comment\n"] {
        let error = only_error(load(text, GATE));
        assert!(error.to_string().contains("staging.yaml"), "{error}");
        assert!(error.message.contains("is empty"), "{error}");
    }
}

#[test]
fn a_bidirectional_override_in_a_label_is_an_error_naming_key_and_code_point() {
    let error = only_error(load("nodes:\n  host_label: \"zone\u{202e}\"\n", GATE));
    assert_eq!(error.key.as_deref(), Some("nodes.host_label"), "{error}");
    assert_eq!(error.position, Some((2, 15)), "{error}");
    assert!(
        error
            .to_string()
            .contains("contains U+202E RIGHT-TO-LEFT OVERRIDE"),
        "{error}"
    );
}

#[test]
fn every_invisible_character_in_keys_and_values_is_reported_at_once() {
    let env = "kube:\n  context: \"a\u{200b}b\"\nnodes:\n  host_label: \"\u{feff}zone\"\ningress:\n  services:\n    - selector: {\"app\u{2066}\": traefik, app2: \"x\\a\"}\nrepo:\n  kubernetes:\n    \"st\u{200e}aging\": clusters/staging\n  sources: [\"a\u{e0001}\"]\n";
    let (errors, text) = all_errors(env);
    for expected in [
        "staging.yaml:2:12: the value of kube.context contains U+200B ZERO WIDTH SPACE",
        "staging.yaml:4:15: the value of nodes.host_label contains U+FEFF ZERO WIDTH NO-BREAK SPACE",
        "contains U+2066 LEFT-TO-RIGHT ISOLATE",
        "the value of ingress.services[0].selector.app2 contains U+0007 (a control character)",
        "staging.yaml:10:5: the key \"st\\u{200e}aging\" in repo.kubernetes contains U+200E LEFT-TO-RIGHT MARK",
        "the value of repo.sources[0] contains U+E0001 (a format character)",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    assert_eq!(errors.len(), 6, "{text}");
}

#[test]
fn a_newline_in_the_description_is_prose_not_an_invisible_character() {
    let env = format!("{STAGING}description: |\n  Two lines\n  of text.\n");
    load(&env, GATE).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_empty_label_key_in_a_selector_is_an_error_at_its_line() {
    let env = "ingress:\n  services:\n    - selector: {\"\": \"\"}\n";
    let error = only_error(load(env, GATE));
    assert_eq!(error.position, Some((3, 18)), "{error}");
    assert_eq!(
        error.key.as_deref(),
        Some("ingress.services[0].selector"),
        "{error}"
    );
    assert!(error.message.contains("an empty label key"), "{error}");
}

#[test]
fn out_of_range_numbers_are_errors_naming_key_and_range() {
    let env = "capacity:\n  rebuild_margin: -1e308\n  margin: -0.5\nkube:\n  page_size: 0\n  timeout: 0s\ningress:\n  urls:\n    - url: https://a.example/\n      expect_status: 1000\nchaos:\n  sample_interval: 0s\n  outage: 1000years\n  budgets:\n    api:\n      longest: 2days\n";
    let (errors, text) = all_errors(env);
    for expected in [
        "staging.yaml:2:19: capacity.rebuild_margin must be a fraction from 0 to below 1, not -1e308",
        "staging.yaml:3:11: capacity.margin must be a fraction from 0 to below 1, not -0.5",
        "staging.yaml:6:12: kube.timeout must be from 1ms to 1h, not 0s",
        "staging.yaml:10:22: ingress.urls[].expect_status must be from 100 to 599, not 1000",
        "staging.yaml:12:20: chaos.sample_interval must be from 1ms to 1h, not 0s",
        "staging.yaml:13:11: chaos.outage must be from 1s to 1day, not",
        "staging.yaml:16:16: chaos.budgets.api.longest must be from 0s to 1day, not 2days",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    // page_size: 0 is allowed: it reads each list unpaged.
    assert_eq!(errors.len(), 7, "{text}");
}

#[test]
fn a_second_yaml_document_is_an_error_not_ignored() {
    let error = only_error(load(
        "nodes:\n  control_planes: 3\n---\nnodes:\n  control_planes: 5\n",
        GATE,
    ));
    assert_eq!(error.position, Some((4, 1)), "{error}");
    assert!(error.message.contains("a second YAML document"), "{error}");
}

#[test]
fn an_invisible_character_in_a_gate_selector_is_an_error_too() {
    let gate = GATE.replace("k8s-app: kube-dns", "k8s-app: \"kube\u{200d}dns\"");
    let error = only_error(load(STAGING, &gate));
    assert_eq!(error.position, Some((7, 26)), "{error}");
    assert!(
        error.to_string().contains(
            "2.yaml:7:26: the value of checks[0].selector.k8s-app contains U+200D ZERO WIDTH JOINER"
        ),
        "{error}"
    );
}

#[test]
fn an_empty_label_key_in_a_gate_selector_is_an_error_at_its_line() {
    let gate = GATE.replace("k8s-app: kube-dns", "'': kube-dns");
    let error = only_error(load(STAGING, &gate));
    assert_eq!(error.position, Some((7, 17)), "{error}");
    assert!(
        error
            .to_string()
            .contains("2.yaml:7:17: an empty label key in checks[0].selector"),
        "{error}"
    );
}

#[test]
fn margins_that_leave_nothing_and_an_empty_switch_are_named_at_their_lines() {
    let env = format!(
        "{STAGING}capacity:\n  margin: 0.6\n  rebuild_margin: 0.4\nproxmox:\n  url: https://pve1:8006\n  token_id: a@pve!b\n  token_secret_env: T\n  insecure_tls: true\n  hosts:\n    pve1: {{switch: '', power: pdu-1}}\n"
    );
    let (errors, text) = all_errors(&env);
    assert!(
        text.contains(
            "capacity.margin 0.6 and capacity.rebuild_margin 0.4 leave nothing for workloads"
        ),
        "{text}"
    );
    assert!(
        text.contains("proxmox.hosts.pve1.switch is empty"),
        "{text}"
    );
    assert_eq!(errors.len(), 2, "{text}");
}

#[test]
fn a_prometheus_basis_with_its_defaults_loads_and_reads_kubelets_series() {
    let env = format!(
        "{STAGING}capacity:\n  basis: prometheus\n  prometheus:\n    url: http://prometheus-operated.monitoring:9090\n    quantile: max\n"
    );
    let config = load(&env, GATE).unwrap();
    let p = config
        .environment("staging")
        .unwrap()
        .capacity
        .prometheus
        .clone()
        .unwrap();
    assert_eq!(p.quantile, gates_core::config::LoadStatistic::Max);
    assert_eq!(
        (p.window.to_string(), p.step.to_string()),
        ("7days".into(), "5m".into())
    );
    assert_eq!(p.node_label, "node");
    assert!(
        p.queries.cpu.contains("container_cpu_usage_seconds_total"),
        "{}",
        p.queries.cpu
    );
}

#[test]
fn a_window_shorter_than_its_step_a_bad_quantile_and_a_missing_section_are_named_at_their_lines() {
    let env = "capacity:\n  basis: prometheus\n  prometheus:\n    url: prometheus:9090\n    window: 5m\n    step: 10m\n    quantile: 1.5\n    max_gap_share: 1\n    node_label: kubernetes.io/hostname\n    queries:\n      cpu: ' '\n";
    let (_, text) = all_errors(env);
    for expected in [
        "staging.yaml:4:10: capacity.prometheus.url `prometheus:9090` uses prometheus, but only http or https is allowed here",
        "staging.yaml:5:13: capacity.prometheus.window 5m is shorter than capacity.prometheus.step 10m",
        "staging.yaml:7:15: capacity.prometheus.quantile must be above 0 and at most 1, not 1.5",
        "staging.yaml:8:20: capacity.prometheus.max_gap_share must be a fraction from 0 to below 1, not 1.0",
        "staging.yaml:9:17: capacity.prometheus.node_label `kubernetes.io/hostname` is not a Prometheus label name",
        "staging.yaml:11:12: capacity.prometheus.queries.cpu is empty",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let error = only_error(load("capacity:\n  basis: prometheus\n", GATE));
    assert_eq!(error.key.as_deref(), Some("capacity.basis"));
    assert!(
        error.to_string().contains(
            "staging.yaml:2:10: capacity.basis is prometheus but capacity.prometheus is missing"
        ),
        "{error}"
    );
}

#[test]
fn a_quantile_that_is_neither_a_number_nor_max_and_too_many_steps_are_refused() {
    let error = only_error(load(
        "capacity:\n  basis: prometheus\n  prometheus:\n    url: http://p:9090\n    quantile: p95\n",
        GATE,
    ));
    let text = error.to_string();
    assert!(text.contains("staging.yaml:5:15"), "{text}");
    assert!(
        text.contains("invalid quantile \"p95\" (write a fraction such as 0.95, or max)"),
        "{text}"
    );
    let error = only_error(load(
        "capacity:\n  basis: prometheus\n  prometheus:\n    url: http://p:9090\n    window: 30d\n    step: 1m\n",
        GATE,
    ));
    assert!(
        error
            .to_string()
            .contains("is 43200 steps; Prometheus answers at most 11,000"),
        "{error}"
    );
    let error = only_error(load(
        "capacity:\n  prometheus:\n    url: http://p:9090\n",
        GATE,
    ));
    assert!(
        error
            .to_string()
            .contains("capacity.prometheus is set but capacity.basis is not prometheus"),
        "{error}"
    );
    let error = only_error(load(
        "capacity:\n  basis: prometheus\n  prometheus:\n    url: https://prometheus.example:9090\n",
        GATE,
    ));
    let text = error.to_string();
    assert!(text.contains("staging.yaml:4:10: capacity.prometheus.url `https://prometheus.example:9090` is https but capacity.prometheus.ca_file is not set"), "{text}");
}

#[test]
fn prometheus_credentials_come_as_a_user_with_a_password_file_or_a_token_file_never_both() {
    let (_, text) = all_errors(
        "capacity:\n  basis: prometheus\n  prometheus:\n    url: http://p:9090\n    username: gates\n",
    );
    assert!(
        text.contains(
            "capacity.prometheus.username and capacity.prometheus.password_file go together"
        ),
        "{text}"
    );
    let (_, text) = all_errors(
        "capacity:\n  basis: prometheus\n  prometheus:\n    url: http://p:9090\n    username: gates\n    password_file: missing-password\n    bearer_token_file: missing-token\n",
    );
    for expected in [
        "staging.yaml:7:24: capacity.prometheus has both basic auth (password_file) and bearer_token_file",
        "staging.yaml:6:20: capacity.prometheus.password_file `missing-password` does not exist",
        "staging.yaml:7:24: capacity.prometheus.bearer_token_file `missing-token` does not exist",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}
