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
/// The page size of every list measured: gates's default (`kube.page_size`), given to the
/// rounds and the client-go lister too, so that each makes the same requests.
const PAGE: u32 = 2000;

fn size(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Node `i`; `kwok` marks it as kwok's (a node without the mark has no kubelet).
fn node(i: usize, kwok: bool) -> Value {
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
            "annotations": if kwok {
                json!({ control_plane::launch::KWOK_MANAGED.0: control_plane::launch::KWOK_MANAGED.1 })
            } else {
                json!({})
            },
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

/// The built-in kinds' collection paths `gates check` lists (the custom resources and
/// metrics are not served by this plane: each answers 404 at once).
const PATHS: [&str; 8] = [
    "/api/v1/nodes",
    "/api/v1/pods",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/daemonsets",
    "/apis/apps/v1/statefulsets",
    "/apis/policy/v1/poddisruptionbudgets",
    "/api/v1/services",
    "/apis/coordination.k8s.io/v1/leases",
];

/// The next page's token of a JSON list: the API server writes `metadata` (and in it
/// `continue`) before `items`, so it is found in the page's first bytes without parsing.
fn json_continue(body: &[u8]) -> Option<String> {
    let head = &body[..body.len().min(4096)];
    let key = b"\"continue\":\"";
    let at = head.windows(key.len()).position(|w| w == key)? + key.len();
    let end = head[at..].iter().position(|&b| b == b'"')?;
    Some(String::from_utf8_lossy(&head[at..at + end]).into_owned()).filter(|t| !t.is_empty())
}

/// One concurrent round of the LISTs `gates check` makes, pages of [`PAGE`], bodies read and
/// dropped: the floor, as `curl` would give it, in JSON or in protobuf.
async fn one_round_of_lists(plane: &ControlPlane, protobuf: bool) -> Duration {
    let http = Arc::new(plane.api_client().expect("an HTTPS client"));
    let token = Arc::new(plane.token(Identity::Admin).to_string());
    let base = plane.url();
    let accept = if protobuf {
        gates::collect::protobuf::ACCEPT
    } else {
        "application/json"
    };
    let started = Instant::now();
    let rounds = PATHS.iter().map(|path| {
        let (http, token) = (http.clone(), token.clone());
        let url = format!("{base}{path}");
        async move {
            let mut next: Option<String> = None;
            loop {
                let mut request = http
                    .get(&url)
                    .bearer_auth(token.as_str())
                    .header("Accept", accept)
                    .query(&[("limit", PAGE)]);
                if let Some(token) = &next {
                    request = request.query(&[("continue", token.as_str())]);
                }
                let answer = request
                    .timeout(Duration::from_secs(120))
                    .send()
                    .await
                    .expect("LIST answers");
                let is_protobuf = answer.headers()["content-type"]
                    .to_str()
                    .is_ok_and(|t| t.starts_with(gates::collect::protobuf::MEDIA_TYPE));
                let body = answer.bytes().await.expect("a body");
                next = if is_protobuf {
                    gates::collect::protobuf::head(&body)
                        .expect("a protobuf list")
                        .next()
                } else {
                    json_continue(&body)
                };
                if next.is_none() {
                    break;
                }
            }
        }
    });
    futures::future::join_all(rounds).await;
    started.elapsed()
}

/// gates' own lists of the same kinds, in this process, decoded into what a check holds:
/// the collection without the command around it.
async fn gates_lists(plane: &ControlPlane, encoding: gates::collect::kube::Encoding) -> Duration {
    use gates::collect::kinds::Kind;
    let client = plane.client(Identity::Reader).await.expect("a client");
    // The built-in kinds: the ones PATHS lists.
    let kinds = Kind::ALL.into_iter().filter(|k| {
        matches!(
            k.coordinates().group,
            "" | "apps" | "policy" | "coordination.k8s.io"
        )
    });
    let started = Instant::now();
    let lists = kinds.map(|kind| {
        let client = client.clone();
        tokio::spawn(async move {
            gates::collect::kube::list_typed_in(client, kind, PAGE, encoding)
                .await
                .expect("listed")
        })
    });
    let held = futures::future::join_all(lists).await;
    let elapsed = started.elapsed();
    drop(held);
    elapsed
}

/// The client-go program of `tools/k8s/lister` (protobuf, typed, pages of [`PAGE`]).
fn client_go_lister(bin: &Path, kubeconfig: &Path) -> Option<Duration> {
    let lister = bin.join("lister");
    if !lister.is_file() {
        println!("no {} (tools/k8s/build.sh builds it)", lister.display());
        return None;
    }
    let out = std::process::Command::new(lister)
        .arg(kubeconfig)
        .arg(PAGE.to_string())
        .output()
        .expect("the lister runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let seconds: f64 = text
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the lister printed {text}"));
    Some(Duration::from_secs_f64(seconds))
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
    // `GATES_BENCH_KWOK=0`: no node is kwok's, so nothing runs the pods (they stay Pending,
    // bound, with no status) and the plane does nothing but answer the lists measured.
    let kwok = std::env::var("GATES_BENCH_KWOK").map_or(true, |v| v != "0");
    let plane = ControlPlane::start(&bin, 160, timing, Kubelets::Shared)
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    let started = Instant::now();
    let namespaces: Vec<Value> = (0..NAMESPACES)
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("scale-{n}")}}))
        .collect();
    create_all(&plane, namespaces).await;
    create_all(&plane, (0..nodes).map(|i| node(i, kwok)).collect()).await;
    create_all(&plane, (0..pods).map(|i| pod(i, nodes)).collect()).await;
    println!(
        "loaded {nodes} nodes and {pods} pods in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if kwok {
        wait_running(&plane, pods).await;
        println!(
            "kwok runs them all after {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }

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

    // `GATES_BENCH_SCRIPT=0` leaves out the kubectl script (minutes per run at 5,000 nodes).
    let script_too = std::env::var("GATES_BENCH_SCRIPT").map_or(true, |v| v != "0");
    use gates::collect::kube::Encoding;
    let mut rows: Vec<(&str, Vec<Duration>)> = vec![
        ("gates check (live, --skip host-loss)", vec![]),
        ("gates's lists alone (protobuf where it reads it)", vec![]),
        ("gates's lists alone, all JSON", vec![]),
        ("client-go lister (tools/k8s/lister, protobuf)", vec![]),
        ("one round of the LISTs in JSON (bodies dropped)", vec![]),
        (
            "one round of the LISTs in protobuf (bodies dropped)",
            vec![],
        ),
        ("kubectl script + gates check --snapshot", vec![]),
    ];
    for _ in 0..RUNS {
        let t = Instant::now();
        let status = gates(&env_dir)
            .args(["check", "scale", "--skip", "host-loss", "--reports"])
            .arg(dir.path().join("reports"))
            .status()
            .expect("gates runs");
        assert!(status.code().is_some_and(|c| c <= 2), "{status}");
        rows[0].1.push(t.elapsed());
        rows[1]
            .1
            .push(gates_lists(&plane, Encoding::Preferred).await);
        rows[2].1.push(gates_lists(&plane, Encoding::Json).await);
        if let Some(t) = client_go_lister(&bin, &kubeconfig) {
            rows[3].1.push(t);
        }
        rows[4].1.push(one_round_of_lists(&plane, false).await);
        rows[5].1.push(one_round_of_lists(&plane, true).await);
        if script_too {
            rows[6]
                .1
                .push(kubectl_script(&bin, &kubeconfig, dir.path(), &env_dir));
        }
    }
    let json_round = median(rows[4].1.clone()).as_secs_f64();
    println!(
        "{:<54} {:>10} {:>14}",
        "median of 3", "seconds", "÷ JSON round"
    );
    for (name, times) in rows {
        if times.is_empty() {
            continue;
        }
        let t = median(times).as_secs_f64();
        println!("{name:<54} {t:>10.2} {:>14.2}", t / json_round);
    }
}
