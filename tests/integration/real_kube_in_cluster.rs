//! gates in a pod, against a real kube-apiserver: no kubeconfig anywhere, the API server's
//! address in `KUBERNETES_SERVICE_HOST`/`_PORT` and the service account's token and CA in their
//! directory (the reader identity's token here), as the kubelet gives a pod. The verdicts are
//! those a kubeconfig for the same identity gives; an unreadable token is an error naming it.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::control_plane::{self, ControlPlane, Identity};
use crate::real_kube::{load_env, real_env_dir};
use crate::support::*;

const PLANE_SUBNET: u8 = 175;
const LAB_SUBNET: u8 = 177;

/// `gates check lab --format json` with `env` as the process's whole environment (plus PATH).
async fn check(env_dir: &Path, env: Vec<(String, String)>) -> (Output, Value) {
    let env_dir = env_dir.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        let mut cmd = gates_with_config(reports.path());
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env)
            .arg("--env-dir")
            .arg(&env_dir)
            .args(["check", "lab", "--format", "json", "--reports"])
            .arg(reports.path());
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("JSON ({err}): {}\n{}", stdout(&out), stderr(&out)));
    (out, json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_pod_the_service_account_gives_the_kubeconfigs_verdicts() {
    let Some((_one, plane)) = control_plane::start_one(PLANE_SUBNET).await else {
        return;
    };
    crate::control_plane::load::install_crds(&plane)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lab = start_lab("adr-007", LAB_SUBNET, dir.path()).await;
    load_env(&plane, &lab, 0).await;
    let with_kubeconfig = real_env_dir(&lab, &plane, Identity::Reader, dir.path(), None);
    let home = tempfile::tempdir().unwrap();
    let home_env = vec![("HOME".to_string(), home.path().display().to_string())];
    let (_, by_kubeconfig) = check(&with_kubeconfig, home_env.clone()).await;

    // The same environment file without its `kube` keys, and the pod's service account.
    let in_pod = dir.path().join("in-pod");
    std::fs::create_dir_all(&in_pod).unwrap();
    let text = std::fs::read_to_string(with_kubeconfig.join("lab.yaml")).unwrap();
    let mut section = String::new();
    let text: String = text
        .lines()
        .filter(|l| {
            if !l.starts_with(' ') && !l.is_empty() {
                section = l.split(':').next().unwrap_or("").to_string();
            }
            section != "kube"
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!text.contains("kubeconfig"), "{text}");
    std::fs::write(in_pod.join("lab.yaml"), &text).unwrap();
    let account = dir.path().join("serviceaccount");
    std::fs::create_dir_all(&account).unwrap();
    std::fs::write(account.join("token"), plane.token(Identity::Reader)).unwrap();
    std::fs::write(account.join("ca.crt"), &plane.ca_pem).unwrap();
    let url = plane.url();
    let (host, port) = url.trim_start_matches("https://").rsplit_once(':').unwrap();
    let mut pod_env = home_env.clone();
    pod_env.extend([
        ("KUBERNETES_SERVICE_HOST".to_string(), host.to_string()),
        ("KUBERNETES_SERVICE_PORT".to_string(), port.to_string()),
        (
            "GATES_SERVICE_ACCOUNT_DIR".to_string(),
            account.display().to_string(),
        ),
    ]);
    let (out, in_cluster) = check(&in_pod, pod_env.clone()).await;
    assert_eq!(
        trial_verdicts(&in_cluster),
        trial_verdicts(&by_kubeconfig),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        in_cluster["source"]["context"], "(in-cluster service account)",
        "{:#}",
        in_cluster["source"]
    );
    // The Kubernetes trials were read, not errors for want of a client.
    assert!(
        !stderr(&out).contains("Kubernetes API of lab cannot be used"),
        "{}",
        stderr(&out)
    );

    the_charts_manifests_apply_and_its_service_account_reads_as_the_reader(
        &plane,
        &in_pod,
        &account,
        &pod_env,
        &trial_verdicts(&by_kubeconfig),
    )
    .await;

    // A pod whose token is not mounted: an error naming the file and the fix.
    std::fs::remove_file(account.join("token")).unwrap();
    let (out, _) = check(&in_pod, pod_env).await;
    let said = stderr(&out);
    assert!(
        said.contains("the service account's token")
            && said.contains("automountServiceAccountToken"),
        "{said}"
    );
}

fn kubectl(plane: &ControlPlane, args: &[&str]) -> Output {
    Command::new(plane.bin.join("kubectl"))
        .arg("--kubeconfig")
        .arg(plane.kubeconfig(Identity::Admin))
        .args(args)
        .output()
        .unwrap()
}

/// The chart rendered by the real Helm CLI: every manifest passes the API server's
/// server-side dry-run; its service account, role and binding applied for real, a token of that
/// service account gives the reader's verdicts in the pod.
async fn the_charts_manifests_apply_and_its_service_account_reads_as_the_reader(
    plane: &ControlPlane,
    in_pod: &Path,
    account: &Path,
    pod_env: &[(String, String)],
    reader_verdicts: &[(String, String)],
) {
    let Some(helm) = crate::helm_chart::helm() else {
        return;
    };
    // With the watch's Deployment and Service too (the ServiceMonitor needs the Prometheus
    // Operator's CRDs, which this API server does not serve), both writing the policy report.
    let values = [
        crate::helm_chart::staging_values(),
        [
            "--set",
            "watch.enabled=true",
            "--set",
            "policyReport.enabled=true",
        ]
        .map(String::from)
        .to_vec(),
    ]
    .concat();
    let docs = crate::helm_chart::template(&helm, &values);
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("chart.json");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
    std::fs::write(&all, list.to_string()).unwrap();
    let path = all.display().to_string();
    let out = kubectl(
        plane,
        &["apply", "--server-side", "--dry-run=server", "-f", &path],
    );
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    for applied in [
        "cronjob.batch/t-gates serverside-applied (server dry run)",
        "deployment.apps/t-gates-watch serverside-applied (server dry run)",
        "service/t-gates-watch serverside-applied (server dry run)",
        "clusterrolebinding.rbac.authorization.k8s.io/t-gates-policy-reports serverside-applied (server dry run)",
    ] {
        assert!(stdout(&out).contains(applied), "{}", stdout(&out));
    }

    let rbac: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
                .contains(&d["kind"].as_str().unwrap())
        })
        .collect();
    let rbac_file = dir.path().join("rbac.json");
    std::fs::write(
        &rbac_file,
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rbac}).to_string(),
    )
    .unwrap();
    let out = kubectl(
        plane,
        &[
            "apply",
            "--server-side",
            "-f",
            &rbac_file.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = kubectl(
        plane,
        &["create", "token", "t-gates", "--namespace", "default"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(account.join("token"), stdout(&out).trim()).unwrap();
    // RBAC's cache takes a moment to see the new binding.
    let mut last = Vec::new();
    for _ in 0..20 {
        let (_, json) = check(in_pod, pod_env.to_vec()).await;
        last = trial_verdicts(&json);
        if last == reader_verdicts {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(last, reader_verdicts);
}
