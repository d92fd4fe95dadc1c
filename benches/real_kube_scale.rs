//! `gates check` against a real kube-apiserver holding a large cluster, next to what an
//! operator would run instead: the kubectl script of the README's offline section (then
//! `gates check --snapshot` over its output), and the floor, one concurrent round of the same
//! LISTs with nothing done to the answers. Nodes and pods are simulated by kwok (nodes Ready,
//! pods Running) on the control plane of `tools/k8s/build.sh`, loopback only.
//!
//! Run with `cargo bench --bench real_kube_scale` (`just bench-k8s`); the size comes from
//! `GATES_BENCH_NODES` and `GATES_BENCH_PODS` (5,000 and 100,000 by default). Prints a table
//! and the ratios; nothing here asserts a time. Needs the binaries (`GATES_K8S_BIN` or
//! `target/k8s-bin/<release>`).

#![allow(dead_code)]

#[path = "../tests/integration/control_plane/mod.rs"]
mod control_plane;

mod support {
    pub fn root() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }
}

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use control_plane::{ControlPlane, Identity, Kubelets, Timing};
use futures::StreamExt;
use serde_json::{Value, json};

const NAMESPACES: usize = 20;
const RUNS: usize = 3;

fn size(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn node(i: usize) -> Value {
    let name = format!("scale-node-{i:05}");
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/zone": format!("pve{}", i % 500 + 1),
    });
    if i < 3 {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": { control_plane::launch::KWOK_MANAGED.0: control_plane::launch::KWOK_MANAGED.1 },
        },
        "status": {
            "allocatable": { "cpu": "32", "memory": "128Gi", "pods": "110" },
            "capacity": { "cpu": "32", "memory": "128Gi", "pods": "110" },
        },
    })
}

fn pod(i: usize, nodes: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("scale-pod-{i:06}"),
            "namespace": format!("scale-{}", i % NAMESPACES),
            "labels": { "app": format!("app-{}", i % 1000) },
        },
        "spec": {
            "nodeName": format!("scale-node-{:05}", i % nodes),
            "containers": [{
                "name": "app",
                "image": "registry.lab.internal/app:v1",
                "resources": { "requests": { "cpu": "10m", "memory": "64Mi" } },
            }],
        },
    })
}

/// Create `objects` (Namespaces, Nodes or Pods) through the API, 32 at a time.
async fn create_all(plane: &ControlPlane, objects: Vec<Value>) {
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
    let client = plane
        .client(Identity::Admin)
        .await
        .expect("an admin client");
    let params = kube::api::PostParams::default();
    let failures: Vec<String> = futures::stream::iter(objects)
        .map(|o| {
            let (client, params) = (client.clone(), params.clone());
            async move {
                let result = match o["kind"].as_str() {
                    Some("Namespace") => kube::Api::<Namespace>::all(client)
                        .create(&params, &serde_json::from_value(o).expect("a Namespace"))
                        .await
                        .map(|_| ()),
                    Some("Node") => kube::Api::<Node>::all(client)
                        .create(&params, &serde_json::from_value(o).expect("a Node"))
                        .await
                        .map(|_| ()),
                    _ => {
                        let ns = o["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or("default")
                            .to_string();
                        kube::Api::<Pod>::namespaced(client, &ns)
                            .create(&params, &serde_json::from_value(o).expect("a Pod"))
                            .await
                            .map(|_| ())
                    }
                };
                result.err().map(|e| e.to_string())
            }
        })
        .buffer_unordered(32)
        .filter_map(|e| async move { e })
        .collect()
        .await;
    assert!(
        failures.is_empty(),
        "{:?}",
        &failures[..failures.len().min(5)]
    );
}

/// Wait until kwok reports `want` pods Running.
async fn wait_running(plane: &ControlPlane, want: usize) {
    let client = plane
        .client(Identity::Admin)
        .await
        .expect("an admin client");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::all(client);
    let params = kube::api::ListParams::default().fields("status.phase=Running");
    let started = Instant::now();
    loop {
        let mut running = 0;
        let mut page = params.clone().limit(5000);
        loop {
            let list = pods.list_metadata(&page).await.expect("pods list");
            running += list.items.len();
            match list.metadata.continue_ {
                Some(token) if !token.is_empty() => page = page.continue_token(&token),
                _ => break,
            }
        }
        if running >= want {
            return;
        }
        if started.elapsed().as_secs() % 60 < 5 {
            println!(
                "{running} of {want} pods Running after {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "only {running} of {want} pods Running after an hour"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// The README's offline script, timed as one run.
fn kubectl_script(bin: &Path, kubeconfig: &Path, dir: &Path, env_dir: &Path) -> Duration {
    let started = Instant::now();
    let kubectl = |args: &[&str], out: &str| {
        let output = std::process::Command::new(bin.join("kubectl"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .expect("kubectl runs");
        std::fs::write(dir.join(out), &output.stdout).expect("written");
    };
    kubectl(
        &[
            "get",
            "nodes,pods,deployments,daemonsets,statefulsets,pdb,services,leases",
            "-A",
            "-o",
            "json",
        ],
        "core.json",
    );
    // Without the Cilium and Longhorn CRDs and metrics-server these print errors; the
    // script runs them anyway, as an operator would.
    kubectl(
        &[
            "get",
            "ciliuml2announcementpolicies,nodes.longhorn.io,volumes.longhorn.io,replicas.longhorn.io,settings.longhorn.io",
            "-A",
            "-o",
            "json",
        ],
        "crds.json",
    );
    kubectl(
        &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"],
        "node-metrics.json",
    );
    let status = gates(env_dir)
        .args(["check", "scale", "--skip", "host-loss", "--snapshot"])
        .arg(dir.join("core.json"))
        .status()
        .expect("gates runs");
    assert!(status.code().is_some_and(|c| c <= 2), "{status}");
    started.elapsed()
}

fn gates(env_dir: &Path) -> std::process::Command {
    let root = support::root();
    let exe = root.join("target/release/gates");
    let exe = if exe.is_file() {
        exe
    } else {
        root.join("target/debug/gates")
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.current_dir(&root)
        .env("NO_COLOR", "1")
        .arg("--config")
        .arg(root.join("gates"))
        .arg("--env-dir")
        .arg(env_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

/// One concurrent round of the LISTs `gates check` makes, pages of 500, bodies read and
/// dropped.
async fn one_round_of_lists(plane: &ControlPlane) -> Duration {
    let http = Arc::new(plane.api_client().expect("an HTTPS client"));
    let token = Arc::new(plane.token(Identity::Admin).to_string());
    let base = plane.url();
    let paths = [
        "/api/v1/nodes",
        "/api/v1/pods",
        "/apis/apps/v1/deployments",
        "/apis/apps/v1/daemonsets",
        "/apis/apps/v1/statefulsets",
        "/apis/policy/v1/poddisruptionbudgets",
        "/api/v1/services",
        "/apis/coordination.k8s.io/v1/leases",
    ];
    let started = Instant::now();
    let rounds = paths.iter().map(|path| {
        let (http, token) = (http.clone(), token.clone());
        let url = format!("{base}{path}");
        async move {
            let mut next: Option<String> = None;
            loop {
                let mut request = http
                    .get(&url)
                    .bearer_auth(token.as_str())
                    .query(&[("limit", "500")]);
                if let Some(token) = &next {
                    request = request.query(&[("continue", token.as_str())]);
                }
                let body: Value = request
                    .timeout(Duration::from_secs(120))
                    .send()
                    .await
                    .expect("LIST answers")
                    .json()
                    .await
                    .expect("a JSON list");
                match body["metadata"]["continue"].as_str() {
                    Some(token) if !token.is_empty() => next = Some(token.to_string()),
                    _ => break,
                }
            }
        }
    });
    futures::future::join_all(rounds).await;
    started.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let nodes = size("GATES_BENCH_NODES", 5000);
    let pods = size("GATES_BENCH_PODS", 100_000);
    // One kwok renewing 5,000 leases and heartbeats keeps two cores busy; with the defaults
    // nodes fell NotReady while 100,000 pods were loaded and their pods were evicted (bare
    // pods do not come back), and with only the grace and lease lengthened, the status
    // heartbeats alone (5,000 every 10 to 21 s) left kwok starting 35 pods a second. The
    // benchmark measures reads, not node lifecycle: an hour's grace and lease and a
    // heartbeat every half hour keep every node Ready and the plane free for the pods.
    let hour = Duration::from_secs(3600);
    let timing = Timing {
        node_monitor_grace: hour,
        toleration: hour,
        node_lease: hour,
        node_heartbeat: hour / 2,
    };
    let plane = ControlPlane::start(&bin, 160, timing, Kubelets::Shared)
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    let started = Instant::now();
    let namespaces: Vec<Value> = (0..NAMESPACES)
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("scale-{n}")}}))
        .collect();
    create_all(&plane, namespaces).await;
    create_all(&plane, (0..nodes).map(node).collect()).await;
    create_all(&plane, (0..pods).map(|i| pod(i, nodes)).collect()).await;
    println!(
        "loaded {nodes} nodes and {pods} pods in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    wait_running(&plane, pods).await;
    println!(
        "kwok runs them all after {:.0} s",
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().expect("a temporary directory");
    let env_dir = dir.path().join("environments");
    std::fs::create_dir_all(&env_dir).expect("created");
    let kubeconfig = plane.kubeconfig(Identity::Reader);
    std::fs::write(
        env_dir.join("scale.yaml"),
        format!(
            "description: the benchmark's simulated cluster\nlike: production\nkube:\n  context: real\n  kubeconfig: {}\nnodes:\n  control_planes: 3\n  host_label: topology.kubernetes.io/zone\ningress:\n  services:\n    - selector: {{ app.kubernetes.io/name: traefik }}\ncapacity:\n  margin: 0.3334\n  basis: requests\n",
            kubeconfig.display()
        ),
    )
    .expect("written");

    let mut check = Vec::new();
    let mut script = Vec::new();
    let mut lists = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let status = gates(&env_dir)
            .args(["check", "scale", "--skip", "host-loss", "--reports"])
            .arg(dir.path().join("reports"))
            .status()
            .expect("gates runs");
        assert!(status.code().is_some_and(|c| c <= 2), "{status}");
        check.push(t.elapsed());
        script.push(kubectl_script(&bin, &kubeconfig, dir.path(), &env_dir));
        lists.push(one_round_of_lists(&plane).await);
    }
    let (check, script, lists) = (median(check), median(script), median(lists));
    println!("{:<52} {:>10}", "median of 3", "seconds");
    println!(
        "{:<52} {:>10.2}",
        "gates check (live, --skip host-loss)",
        check.as_secs_f64()
    );
    println!(
        "{:<52} {:>10.2}",
        "kubectl script + gates check --snapshot",
        script.as_secs_f64()
    );
    println!(
        "{:<52} {:>10.2}",
        "one concurrent round of the LISTs",
        lists.as_secs_f64()
    );
    println!(
        "ratios: gates check / kubectl script {:.2}, gates check / LISTs {:.2}",
        check.as_secs_f64() / script.as_secs_f64(),
        check.as_secs_f64() / lists.as_secs_f64()
    );
}
