//! `gates watch` on the lab: it serves the verdicts a one-shot `check` gives once every
//! source is read; a change in the cluster reaches its metrics through the watch; a watch the
//! API server closes is resumed from its revision and one it expires (410) is listed again;
//! a cluster that stops answering turns the trials into errors naming the state's age, never
//! a stale pass; SIGTERM stops it cleanly.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gates_lab::resources::Res;

use crate::support::*;

const LAB_SUBNET: u8 = 186;
const COREDNS: &str = "gate2::lab::replicated-controller::coredns";

/// A running `gates watch` and everything it has said on stderr.
pub(crate) struct Watch {
    pub(crate) child: Child,
    said: Arc<Mutex<Vec<String>>>,
    base: String,
}

impl Watch {
    pub(crate) fn start(env_dir: &std::path::Path, reports: &std::path::Path) -> Watch {
        Watch::start_with(env_dir, reports, &[])
    }

    /// `gates watch lab` with `extra` arguments after the usual ones.
    pub(crate) fn start_with(
        env_dir: &std::path::Path,
        reports: &std::path::Path,
        extra: &[&str],
    ) -> Watch {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gates"))
            .current_dir(root())
            .env("NO_COLOR", "1")
            .env_remove("GATES_LOG")
            .arg("--config")
            .arg(root().join("gates"))
            .arg("--env-dir")
            .arg(env_dir)
            .args([
                "watch",
                "lab",
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "2s",
                "--stale-after",
                "3s",
                "--debounce",
                "100ms",
                "--reports",
            ])
            .arg(reports)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gates watch starts");
        let said = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let said = said.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Some(at) = line.find("http://") {
                        let addr = line[at..].split_whitespace().next().unwrap().to_string();
                        let _ = tx.send(addr.trim_end_matches('/').to_string());
                    }
                    said.lock().unwrap().push(line);
                }
            });
        }
        let base = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("gates watch says where it serves");
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        Watch { child, said, base }
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let response = reqwest::get(format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|err| panic!("GET {path}: {err}"));
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// Each trial's verdict as the served metrics say it.
    pub(crate) async fn verdicts(&self) -> Vec<(String, String)> {
        let (status, text) = self.get("/metrics").await;
        assert_eq!(status, 200);
        let mut verdicts: Vec<(String, String)> = text
            .lines()
            .filter(|l| l.starts_with("gates_trial_verdict{") && l.ends_with(" 1"))
            .map(|l| (label(l, "trial"), label(l, "verdict")))
            .collect();
        verdicts.sort();
        verdicts
    }

    pub(crate) async fn verdict_of(&self, trial: &str) -> Option<String> {
        self.verdicts()
            .await
            .into_iter()
            .find(|(name, _)| name == trial)
            .map(|(_, v)| v)
    }

    /// Wait until `trial`'s served verdict is `want`.
    pub(crate) async fn until_verdict(&self, trial: &str, want: &str, within: Duration) {
        let start = Instant::now();
        loop {
            let now = self.verdict_of(trial).await;
            if now.as_deref() == Some(want) {
                return;
            }
            assert!(
                start.elapsed() < within,
                "{trial} stayed {now:?}, not {want}, for {within:?}; said:\n{}",
                self.said.lock().unwrap().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) fn said(&self) -> String {
        self.said.lock().unwrap().join("\n")
    }

    /// A served metric's value, by its whole series text (`name{labels}`).
    pub(crate) async fn metric(&self, series: &str) -> Option<f64> {
        let text = self.get("/metrics").await.1;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// SIGTERM, and the exit status with everything said.
    pub(crate) fn terminate(mut self) -> (Option<i32>, String) {
        let pid = self.child.id().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = self.child.wait().unwrap();
        (status.code(), self.said())
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// Each trial's verdict as a one-shot `gates check lab` gives it, sorted.
pub(crate) async fn checked_verdicts(
    env_dir: &std::path::Path,
    reports: &std::path::Path,
) -> Vec<(String, String)> {
    let (env_dir, reports) = (env_dir.to_path_buf(), reports.to_path_buf());
    let out = tokio::task::spawn_blocking(move || {
        gates_with_config(&reports)
            .arg("--env-dir")
            .arg(&env_dir)
            .args(["check", "lab", "--format", "json", "--reports"])
            .arg(&reports)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|err| panic!("{err}: {}", stderr(&out)));
    let mut verdicts = trial_verdicts(&json);
    verdicts.sort();
    verdicts
}

fn label(line: &str, key: &str) -> String {
    let start = line.find(&format!("{key}=\"")).unwrap() + key.len() + 2;
    line[start..][..line[start..].find('"').unwrap()].to_string()
}

/// The lab's Kubernetes requests for `path_part` (as `verb path`), in order.
async fn kube_requests(lab: &gates_lab::Lab, path_part: &str) -> Vec<String> {
    let log: serde_json::Value = reqwest::get(format!("{}/requests", lab.control_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    log.as_array()
        .unwrap()
        .iter()
        .filter(|r| r["protocol"] == "kube")
        .map(|r| r["path"].as_str().unwrap().to_string())
        .filter(|p| p.contains(path_part))
        .collect()
}

fn coredns_pdb(lab: &gates_lab::Lab, delete: bool) -> Option<serde_json::Value> {
    lab.shared.change(|w, _| {
        let env = w.envs.iter_mut().find(|e| e.spec.name == "lab").unwrap();
        let pdb = env
            .store
            .get(Res::PodDisruptionBudgets, "kube-system", "coredns")
            .map(|o| (*o).clone());
        if delete {
            env.store
                .delete(Res::PodDisruptionBudgets, "kube-system", "coredns");
        }
        pdb
    })
}

fn put_back(lab: &gates_lab::Lab, pdb: serde_json::Value) {
    lab.shared.change(|w, _| {
        let env = w.envs.iter_mut().find(|e| e.spec.name == "lab").unwrap();
        env.store.put(Res::PodDisruptionBudgets, pdb);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_serves_what_check_says_follows_changes_resumes_relists_goes_stale_and_stops_on_sigterm()
 {
    let dir = tempfile::tempdir().unwrap();
    // A stopped API server refuses connections and closes the open ones, as a server process
    // does when it exits (the default, a stalling address, is a host that lost power: its
    // open watches go silent, which a watch notices when no bookmark comes).
    let scenario = dir.path().join("refusing.yaml");
    std::fs::write(
        &scenario,
        "name: adr-007-refusing\nextends: adr-007\nset:\n  unreachable: refuse\n",
    )
    .unwrap();
    let lab = start_lab(scenario.to_str().unwrap(), LAB_SUBNET, dir.path()).await;
    let env_dir = dir.path().join("environments");
    let reports = dir.path().join("reports");
    let watch = Watch::start(&env_dir, &reports);

    // Not ready until every source is read; then ready, and healthy all along.
    let start = Instant::now();
    loop {
        let (status, body) = watch.get("/readyz").await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert!(body.starts_with("not ready"), "{body}");
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never ready: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(watch.get("/healthz").await.0, 200);
    assert_eq!(watch.get("/nothing-here").await.0, 404);

    // The served verdicts are the one-shot check's.
    let checked = checked_verdicts(&env_dir, &reports).await;
    assert!(checked.len() > 15, "{checked:?}");
    assert_eq!(watch.verdicts().await, checked);
    assert_eq!(watch.verdict_of(COREDNS).await.as_deref(), Some("pass"));
    let (status, page) = watch.get("/").await;
    assert_eq!(status, 200);
    assert!(page.contains("<title>gates check lab"), "{page}");
    let metrics = watch.get("/metrics").await.1;
    assert!(metrics.contains("gates_watch_ready 1"), "{metrics}");
    assert!(
        metrics.contains("gates_watch_source_up{source=\"pods/v1\"} 1"),
        "{metrics}"
    );
    assert!(metrics.ends_with("# EOF\n"));

    // A change reaches the metrics through the watch (no list of PDBs after the first).
    let pdb_lists = |paths: &[String]| paths.iter().filter(|p| !p.contains("watch=")).count();
    let before = kube_requests(&lab, "/poddisruptionbudgets").await;
    let pdb = coredns_pdb(&lab, true).expect("the lab has coredns's PDB");
    watch
        .until_verdict(COREDNS, "fail", Duration::from_secs(10))
        .await;
    // The terminal line follows the same evaluation (printed after it is served).
    let start = Instant::now();
    while !watch.said().contains(&format!("{COREDNS}: pass -> fail")) {
        assert!(start.elapsed() < Duration::from_secs(5), "{}", watch.said());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = kube_requests(&lab, "/poddisruptionbudgets").await;
    assert_eq!(pdb_lists(&after), pdb_lists(&before), "{after:#?}");

    // The API server closes every watch (a restart): each is resumed from its revision,
    // without a list, and changes still arrive.
    lab.shared.end_watches(false);
    put_back(&lab, pdb.clone());
    watch
        .until_verdict(COREDNS, "pass", Duration::from_secs(10))
        .await;
    let resumed = kube_requests(&lab, "/poddisruptionbudgets").await;
    assert_eq!(pdb_lists(&resumed), pdb_lists(&before), "{resumed:#?}");
    let watches: Vec<&String> = resumed.iter().filter(|p| p.contains("watch=")).collect();
    assert!(watches.len() >= 2, "{resumed:#?}");
    let last = watches.last().unwrap();
    let revision: u64 = last
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("resourceVersion="))
        .and_then(|r| r.parse().ok())
        .unwrap_or_default();
    assert!(revision > 0, "the watch resumes from a revision: {last}");

    // The API server expires every watch (410 Gone): each kind is listed again, and changes
    // still arrive.
    lab.shared.end_watches(true);
    let start = Instant::now();
    while pdb_lists(&kube_requests(&lab, "/poddisruptionbudgets").await) == pdb_lists(&before) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no list after 410"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    coredns_pdb(&lab, true);
    watch
        .until_verdict(COREDNS, "fail", Duration::from_secs(10))
        .await;
    put_back(&lab, pdb);
    watch
        .until_verdict(COREDNS, "pass", Duration::from_secs(10))
        .await;

    // The cluster stops answering: past --stale-after every trial that reads it is an error
    // that says how old its state is.
    lab.stop().await;
    watch
        .until_verdict(COREDNS, "error", Duration::from_secs(20))
        .await;
    let (_, page) = watch.get("/").await;
    assert!(page.contains("state older than 3s"), "{page}");
    // The polled sources too (Talos, Proxmox, the API endpoint), once a poll has gone
    // unanswered past the interval and the allowance.
    let start = Instant::now();
    loop {
        let passing: Vec<(String, String)> = watch
            .verdicts()
            .await
            .into_iter()
            .filter(|(_, v)| v == "pass")
            .collect();
        let metrics = watch.get("/metrics").await.1;
        if passing.is_empty() && metrics.contains("gates_watch_source_up{source=\"pods/v1\"} 0") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "still passing on a stale state: {passing:?}\n{}",
            watch.said()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // SIGTERM stops it cleanly.
    let (code, said) = watch.terminate();
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("stopped by SIGTERM"), "{said}");
}

/// The check kinds' declared inputs, on a whole live state (the fixtures have no Talos,
/// Proxmox or API endpoint): withholding any part a kind does not declare leaves its
/// findings as they were, so a watch re-evaluates every trial a change can move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_live_lab_state_every_check_kind_declares_every_part_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let _lab = start_lab("adr-007", LAB_SUBNET + 1, dir.path()).await;
    let config = gates_engine::config::Config::load(
        &root().join("gates"),
        &[dir.path().join("environments")],
    )
    .expect("the configuration with the lab's environments");
    for name in ["lab", "lab-production"] {
        let env = config.environment(name).unwrap();
        let state = gates_engine::collect::live(&config, env).await;
        assert!(state.talos.present().is_some() && state.proxmox.present().is_some());
        let specs = gates_engine::runner::trials(&config, env);
        assert!(specs.len() > 5, "{name}: {} trials", specs.len());
        for spec in &specs {
            let undeclared =
                gates_core::checks::testing::undeclared_inputs(&spec.check, env, &state);
            assert!(
                undeclared.is_empty(),
                "{} reads {undeclared:?} undeclared",
                spec.name
            );
        }
    }
}

#[test]
fn a_watch_that_cannot_reach_its_cluster_at_all_or_listen_stops_at_once_saying_why_once() {
    let reports = tempfile::tempdir().unwrap();
    let out = gates_with_config(reports.path())
        .args([
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "watch",
            "staging",
            "--listen",
            "127.0.0.1:0",
        ])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert_eq!(
        said.matches("cannot read kubeconfig /nonexistent/kubeconfig")
            .count(),
        1,
        "{said}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = gates_with_config(reports.path())
        .args(["watch", "staging", "--listen", &addr])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("cannot listen on {addr}")),
        "{}",
        stderr(&out)
    );
}

/// The published channel keeps only the newest evaluation, so a reader can miss the one that
/// re-evaluated its trial (the host-loss prediction is published on its own after the quick
/// trials). Each evaluation says in which evaluation every trial was last re-evaluated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_evaluation_says_when_each_trial_was_last_evaluated_so_a_missed_one_is_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let lab = start_lab("adr-007", LAB_SUBNET + 2, dir.path()).await;
    let config = gates_engine::config::Config::load(
        &root().join("gates"),
        &[dir.path().join("environments")],
    )
    .expect("the project's configuration");
    let (publish, mut newest) = tokio::sync::watch::channel(None);
    let engine = tokio::spawn(gates_engine::watch::run(
        config,
        root(),
        gates_engine::watch::WatchOptions {
            env: "lab".into(),
            reports: dir.path().join("reports"),
            interval: Duration::from_secs(3600),
            stale_after: Duration::from_secs(3600),
            debounce: Duration::ZERO,
        },
        publish,
    ));
    let newest_of = |rx: &tokio::sync::watch::Receiver<
        Option<Arc<gates_engine::watch::Published>>,
    >| rx.borrow().clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready = loop {
        tokio::time::timeout_at(deadline.into(), newest.changed())
            .await
            .expect("ready within a minute")
            .expect("the watch runs");
        if let Some(p) = newest_of(&newest).filter(|p| p.ready) {
            break p;
        }
    };
    // Every trial has been evaluated (the first evaluation is whole), none after the newest.
    let names: Vec<&str> = ready
        .record
        .trials
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert!(names.contains(&COREDNS), "{names:?}");
    for name in &names {
        let at = ready.evaluated_in.get(*name).copied();
        assert!(
            at.is_some_and(|at| at <= ready.evaluation),
            "{name}: {at:?}"
        );
    }
    for name in &ready.reevaluated {
        assert_eq!(ready.evaluated_in[name], ready.evaluation, "{name}");
    }

    // A coredns pod turns not ready: whatever the reader sees next, it can tell that
    // coredns's trial was evaluated after the change.
    let last = newest_of(&newest).expect("published");
    let before = last.evaluation;
    let coredns_before = last
        .record
        .trials
        .iter()
        .find(|t| t.name == COREDNS)
        .expect("coredns's trial")
        .clone();
    let mut pod = lab.shared.read(|w| {
        w.envs[0]
            .store
            .list(Res::Pods)
            .into_iter()
            .map(|(_, o)| (*o).clone())
            .find(|p| p["metadata"]["labels"]["k8s-app"] == "kube-dns")
            .expect("a coredns pod")
    });
    for condition in pod["status"]["conditions"].as_array_mut().unwrap() {
        if condition["type"] == "Ready" {
            condition["status"] = serde_json::json!("False");
        }
    }
    lab.shared
        .change(|w, _| w.envs[0].store.put(Res::Pods, pod.clone()));
    let name = pod["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_string();
    let not_ready = |p: &gates_engine::watch::Published| {
        p.record.trials.iter().any(|t| {
            t.name == COREDNS
                && t.finding
                    .evidence
                    .iter()
                    .any(|line| line.contains(&name) && !line.ends_with(": Ready"))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        tokio::time::timeout_at(deadline.into(), newest.changed())
            .await
            .expect("coredns's trial evaluated with the pod not ready within 30 s")
            .expect("the watch runs");
        let p = newest_of(&newest).expect("published");
        for name in &p.reevaluated {
            assert_eq!(p.evaluated_in[name], p.evaluation, "{name}");
        }
        assert!(p.evaluated_in.values().all(|at| *at <= p.evaluation));
        if not_ready(&p) {
            // Whether or not the evaluation that saw it was the one read here.
            assert!(p.evaluated_in[COREDNS] > before);
            assert_ne!(
                p.record
                    .trials
                    .iter()
                    .find(|t| t.name == COREDNS)
                    .unwrap()
                    .finding,
                coredns_before.finding
            );
            break;
        }
    }
    engine.abort();
    lab.stop().await;
}
