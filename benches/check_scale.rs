//! How long `gates check` takes, and how much memory it needs, on a large cluster:
//! reading a snapshot of thousands of nodes and tens of thousands of pods, and evaluating
//! every trial over it; then the same collection live from the lab's generated scale
//! scenario, over HTTPS with paged lists. Run with `cargo bench --bench check_scale`
//! (`just bench`). Prints a table; nothing here asserts a time.

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{Value, json};

use gates::collect;
use gates::config::Config;
use gates::runner;

const NODES: usize = 3000;
const PODS_PER_NODE: usize = 10;
const RUNS: usize = 5;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = Config::load(&root.join("gates"), &[]).expect("the shipped configuration loads");
    let env = config
        .environment("production")
        .expect("production is shipped");

    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("scale.json");
    std::fs::write(&file, serde_json::to_vec(&snapshot()).expect("serializes")).expect("written");
    let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    println!(
        "snapshot: {NODES} nodes, {} pods, {:.1} MiB",
        NODES * PODS_PER_NODE,
        size as f64 / (1024.0 * 1024.0)
    );

    let specs = runner::trials(&config, env);
    let args = libtest_mimic::Arguments::default();
    let selected = runner::selected(&args, &specs);
    let mut read_times = Vec::new();
    let mut eval_times = Vec::new();
    let mut slowest: Vec<(Duration, String, gates::verdict::Verdict)> = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let snapshot =
            collect::snapshot::read(std::slice::from_ref(&file), Utc::now()).expect("reads");
        read_times.push(started.elapsed());
        let state = snapshot.state;
        let started = Instant::now();
        let results = runner::evaluate(&selected, env, &state);
        eval_times.push(started.elapsed());
        assert_eq!(results.len(), selected.len());
        slowest = results
            .iter()
            .map(|r| (r.duration, r.name.clone(), r.finding.verdict))
            .collect();
    }
    println!("{:<44} {:>10} {:>10}", "step", "median", "max");
    row("read snapshot (parse + type)", &mut read_times);
    row(
        &format!("evaluate {} trials", selected.len()),
        &mut eval_times,
    );
    slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
    for (time, name, verdict) in slowest.iter().take(4) {
        println!("  {name:<42} {:>8.1}ms ({})", ms(*time), verdict.as_str());
    }
    println!("peak resident memory: {}", peak_rss());

    live_from_lab(&config);
}

/// Collect live from the lab's generated scenario, over the real protocols.
fn live_from_lab(config: &Config) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let lab = match gates_lab::Lab::start(gates_lab::LabOptions {
            scenario: "adr-007".into(),
            generate_nodes: Some(NODES),
            subnet: 199,
            speed: 1.0,
            state_dir: dir.path().to_path_buf(),
            env_dir: Some(dir.path().join("environments")),
        })
        .await
        {
            Ok(lab) => lab,
            Err(err) => {
                println!("live: the lab did not start ({err}); skipped");
                return;
            }
        };
        let config = Config::load(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("gates")
                .as_path(),
            &[dir.path().join("environments")],
        )
        .unwrap_or_else(|_| config.clone());
        let Some(env) = config
            .environments
            .values()
            .find(|e| e.name == "lab-production" || e.name == "lab")
        else {
            println!("live: the lab wrote no environment file; skipped");
            lab.stop().await;
            return;
        };
        println!("live: environment {} of {}", env.name, env.file.display());
        let mut times = Vec::new();
        let mut pods = 0;
        for _ in 0..RUNS {
            let started = Instant::now();
            let state = collect::live(&config, env).await;
            times.push(started.elapsed());
            pods = match &state.pods {
                gates::state::Collected::Present(p) => p.len(),
                other => {
                    println!("live: pods not collected: {other:?}");
                    0
                }
            };
        }
        println!("{:<44} {:>10} {:>10}", "step", "median", "max");
        row(
            &format!("live collect from the lab ({pods} pods)"),
            &mut times,
        );
        println!("peak resident memory: {}", peak_rss());
        lab.stop().await;
    });
}

fn row(name: &str, times: &mut [Duration]) {
    times.sort();
    let median = times[times.len() / 2];
    let max = times[times.len() - 1];
    println!("{name:<44} {:>8.1}ms {:>8.1}ms", ms(median), ms(max));
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l["VmHWM:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// A kubectl-shaped List: three control planes and many workers, each with pods.
fn snapshot() -> Value {
    let mut items = Vec::new();
    for n in 0..NODES {
        let name = format!("node-{n:05}");
        let mut labels = json!({"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": format!("pve{}", n % 5 + 1)});
        if n < 3 {
            labels["node-role.kubernetes.io/control-plane"] = json!("");
        }
        items.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": {"systemUUID": format!("00000000-0000-0000-0000-{n:012}"), "machineID": "", "bootID": "",
                                    "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                                    "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}
        }));
        items.push(
            json!({"metadata": {"name": name}, "usage": {"cpu": "2500m", "memory": "20Gi"},
                          "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics"}),
        );
        for p in 0..PODS_PER_NODE {
            items.push(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("app-{n}-{p}"), "namespace": format!("team-{}", p % 7), "labels": {"app": format!("app-{}", p % 50)}},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "200m", "memory": "512Mi"}}}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            }));
        }
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}
