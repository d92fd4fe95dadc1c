//! Entry points shared by the fuzz targets in `fuzz/` and by the test that replays their
//! corpus (`tests/integration/fuzz_corpus.rs`). Each takes arbitrary bytes and runs one
//! parser exactly as the CLI reaches it (through a file, since that is how input arrives):
//! the snapshot reader, the environment and gate file loader, the chaos journal reader, the
//! chaos report reader, a Jinja Talos template, a Kustomize base and overlay, what gates
//! reads of a Proxmox answer, a VM's network device (parsed, pulled and rendered back), a Prometheus range answer (measured over a window), a fleet's environment list, and
//! the splitter of a live list's pages and the protobuf list decoder (which read an
//! answer's body, not a file). The property asserted is the one users rely on: bad input
//! gives an error, never a panic or a hang. The snapshot target also holds the parallel
//! split of a large list to the scan in turn, on every input.

use std::path::{Path, PathBuf};

/// One fuzz target: arbitrary bytes in, nothing out.
pub type Target = fn(&[u8]);

/// Every target by name, as `fuzz/fuzz_targets/*.rs` and `fuzz/corpus/*` name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("snapshot", snapshot),
    ("environment", environment),
    ("net_device", net_device),
    ("gate", gate),
    ("journal", journal),
    ("chaos_report", chaos_report),
    ("list_page", list_page),
    ("talos_template", talos_template),
    ("kustomize", kustomize),
    ("proxmox_answer", proxmox_answer),
    ("prometheus_answer", prometheus_answer),
    ("env_list", env_list),
    ("protobuf_list", protobuf_list),
    ("chart_values", chart_values),
];

/// Where one input is cut into the files of a Kustomize tree, in order: the overlay's
/// kustomization.yaml, its resource, the base's kustomization.yaml and the base's resource.
const FILE_BREAK: &[u8] = b"\n--- next file ---\n";

/// The Kustomize renderer over a base and an overlay made of the input's parts (name
/// prefixes, name references, patches and generators all reach the same code as a
/// repository's trials).
pub fn kustomize(data: &[u8]) {
    let dir = scratch();
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(FILE_BREAK.len()).position(|w| w == FILE_BREAK) {
        parts.push(&rest[..at]);
        rest = &rest[at + FILE_BREAK.len()..];
    }
    parts.push(rest);
    let files = [
        "overlay/kustomization.yaml",
        "overlay/resource.yaml",
        "base/kustomization.yaml",
        "base/resource.yaml",
    ];
    for (file, part) in files.iter().zip(parts) {
        put(dir.path(), file, part);
    }
    let _ = crate::repo::kustomize::render(dir.path(), "overlay");
    let _ = crate::repo::kustomize::render(dir.path(), "base");
}

/// What gates reads of a Proxmox answer: a VM config's drives and `/storage` entries.
pub fn proxmox_answer(data: &[u8]) {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = gates_infra::proxmox::VmConfig::from_value(&value);
        for entry in value.as_array().into_iter().flatten() {
            let _ = gates_infra::proxmox::Storage::from_value(entry);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = gates_infra::proxmox::VmDisk::parse("scsi0", text);
    }
}

/// A VM's `netN` property string as the partition fault reads it: parsed, or refused; a
/// parsed one rendered back unchanged, and with its link pulled and put back.
pub fn net_device(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(device) = gates_infra::proxmox::NetDevice::parse(text) {
        assert_eq!(device.to_string(), text, "rendered back unchanged");
        let down = device.with_link_down(true);
        assert_eq!(down.link_down(), Ok(true));
        let again = gates_infra::proxmox::NetDevice::parse(&down.to_string());
        assert_eq!(again.as_ref(), Ok(&down), "a pulled device parses back");
        assert_eq!(down.with_link_down(false).link_down(), Ok(false));
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = gates_infra::proxmox::VmNetDevices::from_value(&value);
    }
}

/// What gates reads of a Prometheus range query's answer, and the measurement of each series
/// over a window (times and values from the input, so every odd float reaches it).
pub fn prometheus_answer(data: &[u8]) {
    if let Ok(series) = crate::collect::prometheus::decode(data) {
        let window = gates_core::load::Window {
            start_ms: 1_733_400_000_000,
            end_ms: 1_733_400_000_000 + 3_600_000,
            step_ms: 300_000,
        };
        for s in &series {
            for statistic in [
                gates_core::config::LoadStatistic::Max,
                gates_core::config::LoadStatistic::Quantile(0.95),
            ] {
                let _ = gates_core::load::measure(&window, &s.values, statistic);
            }
        }
    }
}

/// A values file for the Helm chart (`gates chart-values FILE`), judged against the chart's
/// schema over its own values: every problem names a line of the input.
pub fn chart_values(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let schema: serde_json::Value =
        serde_json::from_str(crate::commands::chart_values::SCHEMA).expect("the chart's schema");
    let defaults =
        gates_core::chart_values::values("values.yaml", crate::commands::chart_values::DEFAULTS)
            .expect("the chart's values");
    if let Ok(problems) = gates_core::chart_values::check("values.yaml", text, &schema, &defaults) {
        // YAML's lines: a lone carriage return breaks a line too (`str::lines` keeps it).
        let lines = text
            .replace("\r\n", "\n")
            .replace('\r', "\n")
            .lines()
            .count()
            + 1;
        for problem in problems {
            assert!(
                (1..=lines).contains(&problem.site.line),
                "{problem} names no line of the input"
            );
        }
    }
}

/// An environment list of a fleet run (`gates check --envs FILE`): names read are known and
/// listed once, and every problem names a line of the input.
pub fn env_list(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let known = ["staging", "production", "lab", "lab-production"];
    match gates_engine::fleet::parse_list(Path::new("fleet.txt"), text, &known) {
        Ok(names) => {
            for (i, name) in names.iter().enumerate() {
                assert!(known.contains(&name.as_str()), "{name} is not known");
                assert!(!names[..i].contains(name), "{name} twice");
            }
        }
        Err(problems) => {
            let lines = text.lines().count();
            for problem in problems {
                assert!((1..=lines).contains(&problem.line), "{problem}");
            }
        }
    }
}

/// A fresh scratch directory for one input.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

fn put(dir: &Path, rel: &str, data: &[u8]) -> PathBuf {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("a scratch directory");
    }
    std::fs::write(&path, data).expect("a scratch file");
    path
}

/// A Jinja Talos template in a patch directory, read as written and rendered per role with
/// `repo.template_env`, beside a node file.
pub fn talos_template(data: &[u8]) {
    let dir = scratch();
    put(dir.path(), "talos/machineconfig.yaml.j2", data);
    put(
        dir.path(),
        "talos/controlplane/cp.yaml",
        b"machine:\n  network:\n    hostname: cp\n",
    );
    let env = crate::config::TemplateEnv {
        control_plane: [("MACHINE_TYPE".to_string(), "controlplane".to_string())].into(),
        worker: [("MACHINE_TYPE".to_string(), "worker".to_string())].into(),
    };
    let _ = crate::repo::talos::load(dir.path(), "talos", &[], None);
    let _ = crate::repo::talos::load(dir.path(), "talos", &[], Some(&env));
}

/// A page of a live list as the API server answers it: split into its objects, its
/// continue token and its remaining count, the same by the one-pass scan and the full parse.
pub fn list_page(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        crate::collect::kube::assert_page_paths_agree(text);
    }
}

/// A page of a live list in protobuf: its head (the next token, read first) and its pods,
/// decoded or refused.
pub fn protobuf_list(data: &[u8]) {
    let _ = crate::collect::protobuf::head(data);
    let _ = crate::collect::protobuf::decode_list(crate::collect::kinds::Kind::Pod, data);
}

/// `gates check ENV --snapshot FILE`'s reader.
pub fn snapshot(data: &[u8]) {
    let dir = scratch();
    let file = put(dir.path(), "snapshot", data);
    let _ = crate::collect::snapshot::read(&[file], chrono::Utc::now());
    // Only lists of megabytes are split in parallel: small inputs are split here.
    if let Ok(text) = std::str::from_utf8(data) {
        crate::collect::json_spans::assert_guessed_split_agrees(text);
    }
}

const GATE: &str =
    "gate: 1\ntitle: A gate.\nenvironments: [fuzz]\nchecks:\n  - kind: distinct-hosts\n";
const ENVIRONMENT: &str = "nodes:\n  control_planes: 3\n";

/// The configuration loader with `data` as an environment file.
pub fn environment(data: &[u8]) {
    let dir = scratch();
    put(dir.path(), "environments/fuzz.yaml", data);
    put(dir.path(), "adr/1.yaml", GATE.as_bytes());
    let _ = crate::config::Config::load(dir.path(), &[]);
}

/// The configuration loader with `data` as a gate file.
pub fn gate(data: &[u8]) {
    let dir = scratch();
    put(dir.path(), "environments/fuzz.yaml", ENVIRONMENT.as_bytes());
    put(dir.path(), "adr/1.yaml", data);
    if let Ok(config) = crate::config::Config::load(dir.path(), &[])
        && let Ok(env) = config.environment("fuzz")
    {
        // Trial names are built from what the file says: they must stay printable.
        let _ = crate::runner::trials(&config, env);
    }
}

/// The chaos journal reader and what `gates recover` derives from it.
pub fn journal(data: &[u8]) {
    let dir = scratch();
    let file = put(dir.path(), "chaos-fuzz.journal", data);
    if let Ok(records) = gates_engine::chaos::journal::read(&file) {
        let _ = gates_engine::chaos::journal::plan(&records);
        let _ = gates_engine::chaos::journal::pending_restore(&records);
        let _ = gates_engine::chaos::journal::owed_text(&records);
    }
}

/// The chaos report reader behind gate 4, and the gate-4 check on what it read.
pub fn chaos_report(data: &[u8]) {
    let dir = scratch();
    put(dir.path(), "chaos-fuzz-20261129T200000Z.json", data);
    if let Ok(Some(evidence)) = gates_engine::report_files::newest_chaos(dir.path(), "fuzz") {
        let mut env: crate::config::Environment =
            gates_core::yaml::from_str("{}").expect("the defaults parse");
        env.name = "fuzz".to_string();
        let mut state = crate::state::State::empty(
            crate::state::Source::Snapshot { files: Vec::new() },
            chrono::Utc::now(),
        );
        state.chaos_report = crate::state::Collected::Present(evidence);
        let spec: crate::checks::CheckSpec =
            gates_core::yaml::from_str("{kind: chaos-report}").expect("a check");
        let _ = spec.evaluate(crate::checks::Context {
            env: &env,
            state: &state,
            indexes: &crate::checks::Indexes::new(&state),
            pause: &gates_core::pause::NEVER,
        });
    }
}
