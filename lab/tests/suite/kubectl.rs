//! Conformance with kubectl, a client nobody here wrote (issue 4 item 12). kubectl must be
//! installed (`.ci/run` installs Debian's `kubernetes-client`); without it this test fails.

use crate::common;

use std::process::Command;

fn kubectl_path() -> String {
    for p in ["/usr/bin/kubectl", "/usr/local/bin/kubectl"] {
        if std::path::Path::new(p).exists() {
            return p.to_string();
        }
    }
    match Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
    {
        Ok(o) if o.status.success() => "kubectl".to_string(),
        _ => panic!(
            "kubectl is not installed: install Debian's `kubernetes-client` (CI does this in .ci/run)"
        ),
    }
}

async fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let bin = kubectl_path();
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=20s")
        .args(args);
    // kubectl caches discovery under $HOME; keep it inside the test's temp dir.
    cmd.env("KUBECACHEDIR", kubeconfig.with_file_name("kubecache"));
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("kubectl finished")
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_the_lab() {
    let (lab, _dir) = common::start("adr-007", 70, 1.0).await;
    let kc = lab.files.kubeconfig.clone();

    let nodes = kubectl(&kc, &["get", "nodes"]).await;
    for n in ["talos-lab-cp-01", "talos-lab-cp-02", "talos-lab-cp-03"] {
        assert!(nodes.contains(n), "{nodes}");
    }
    assert!(
        nodes.contains("Ready") && nodes.contains("control-plane"),
        "{nodes}"
    );

    let prod = kubectl(
        &kc,
        &["--context", "lab-production", "get", "nodes", "-o", "name"],
    )
    .await;
    assert!(prod.contains("node/talos-prod-cp-01"), "{prod}");

    let pods = kubectl(&kc, &["get", "pods", "-A", "-l", "k8s-app=kube-dns"]).await;
    assert_eq!(
        pods.lines().filter(|l| l.contains("coredns-")).count(),
        2,
        "{pods}"
    );
    assert!(
        pods.lines()
            .next()
            .is_some_and(|h| h.starts_with("NAMESPACE")),
        "{pods}"
    );

    let pdbs = kubectl(&kc, &["get", "pdb", "-A"]).await;
    assert!(
        pdbs.contains("coredns") && pdbs.contains("cilium-operator"),
        "{pdbs}"
    );

    let l2 = kubectl(&kc, &["get", "ciliuml2announcementpolicies"]).await;
    assert!(l2.contains("ingress-address"), "{l2}");
    let l2json = kubectl(&kc, &["get", "ciliuml2announcementpolicies", "-o", "json"]).await;
    let v: serde_json::Value = serde_json::from_str(&l2json).expect("json");
    assert_eq!(v["items"][0]["apiVersion"], "cilium.io/v2alpha1");

    let raw = kubectl(&kc, &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"]).await;
    let v: serde_json::Value = serde_json::from_str(&raw).expect("json");
    assert_eq!(v["kind"], "NodeMetricsList");
    assert_eq!(v["items"].as_array().map(|i| i.len()), Some(3));

    let lh = kubectl(
        &kc,
        &[
            "get",
            "volumes.longhorn.io",
            "-n",
            "longhorn-system",
            "-o",
            "jsonpath={.items[*].status.robustness}",
        ],
    )
    .await;
    assert!(lh.split_whitespace().any(|r| r == "healthy"), "{lh}");

    // The read-only context can read but not write.
    let ro = kubectl(
        &kc,
        &[
            "--context",
            "lab-readonly",
            "get",
            "pods",
            "-n",
            "kube-system",
            "-o",
            "name",
        ],
    )
    .await;
    assert!(ro.contains("pod/coredns-"));
    let out = Command::new(kubectl_path())
        .arg("--kubeconfig")
        .arg(&kc)
        .args([
            "--context",
            "lab-readonly",
            "delete",
            "pod",
            "-n",
            "kube-system",
            "nope",
        ])
        .env("KUBECACHEDIR", kc.with_file_name("kubecache"))
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watch_shows_a_node_going_not_ready() {
    use tokio::io::AsyncBufReadExt;
    // Speed 40: the 40 s node-monitor grace period takes one real second.
    let (lab, _dir) = common::start("adr-007", 71, 40.0).await;
    let kc = lab.files.kubeconfig.clone();
    let mut child = tokio::process::Command::new(kubectl_path())
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["get", "nodes", "--watch"])
        .env("KUBECACHEDIR", kc.with_file_name("kubecache"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    // The initial listing first.
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|l: &&String| l.contains("talos-lab-cp-"))
        .count()
        < 3
    {
        let l = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("initial rows")
            .expect("read")
            .expect("line");
        seen.push(l);
    }
    // pve2: not the VIP holder's host, so the watch connection through the VIP survives.
    lab.shared.power_loss_host("pve2").expect("power loss");
    let found = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("talos-lab-cp-02") && l.contains("NotReady") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    let _ = child.kill().await;
    assert!(
        found,
        "kubectl --watch printed the node going NotReady; saw {seen:?}"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_wide_output_has_every_column_and_events_list_a_not_ready_node() {
    // Speed 40: the 40 s node-monitor grace period takes one real second.
    let (lab, _dir) = common::start("adr-007", 72, 40.0).await;
    let kc = lab.files.kubeconfig.clone();
    let nodes = kubectl(&kc, &["get", "nodes", "-o", "wide"]).await;
    let header: Vec<&str> = nodes
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ],
        "{nodes}"
    );
    let pods = kubectl(&kc, &["get", "pods", "-n", "kube-system", "-o", "wide"]).await;
    let header = pods.lines().next().unwrap_or("");
    for column in ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"] {
        assert!(header.contains(column), "{header}");
    }
    // Every pod row shows an address from its node's 10.244.x.0/24.
    assert!(
        pods.lines().skip(1).all(|row| row
            .split_whitespace()
            .any(|cell| cell.starts_with("10.244."))),
        "{pods}"
    );

    lab.shared.power_loss_host("pve2").expect("power loss");
    common::eventually(10, "talos-lab-cp-02 is NotReady", || async {
        lab.shared.read(|w| {
            w.node_by_name("talos-lab-cp-02")
                .is_some_and(|n| !w.nodes[n].ready)
        })
    })
    .await;
    let events = kubectl(&kc, &["get", "events", "-A"]).await;
    assert!(
        events
            .lines()
            .any(|l| l.contains("NodeNotReady") && l.contains("node/talos-lab-cp-02")),
        "{events}"
    );
    lab.stop().await;
}
