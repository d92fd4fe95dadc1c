//! The chaos step against the lab: the real `gates` binary, a lab started in the test
//! process (its environment files go to `--env-dir`), compressed time. Each test uses its
//! own lab subnet so tests run in parallel; every wait is bounded by a deadline.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gates_lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::{root, stderr, stdout, validate_junit};

mod campaign;
mod partition;

/// Simulated seconds per real second: a 60 s VIP failover takes 1.5 s, the host stays down
/// for 9 s (six simulated minutes).
const SPEED: f64 = 40.0;

struct Bench {
    lab: Lab,
    dir: tempfile::TempDir,
}

impl Bench {
    async fn start(scenario: &str, subnet: u8) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let lab = Lab::start(LabOptions {
            scenario: scenario.to_string(),
            subnet,
            speed: SPEED,
            state_dir: dir.path().join("state"),
            env_dir: Some(dir.path().join("env")),
            ..LabOptions::default()
        })
        .await
        .expect("the lab starts");
        Bench { lab, dir }
    }

    /// The lab's environment file with Proxmox requests giving up after `timeout` (`2s`),
    /// so a stalled API is outlasted by retries rather than by one long read.
    fn proxmox_timeout(&self, timeout: &str) {
        let env_file = self.dir.path().join("env/lab.yaml");
        let text = std::fs::read_to_string(&env_file).unwrap();
        assert!(text.contains("proxmox:\n"), "{text}");
        std::fs::write(
            &env_file,
            text.replacen(
                "proxmox:\n",
                &format!("proxmox:\n  timeout: {timeout}\n"),
                1,
            ),
        )
        .unwrap();
    }

    /// The shipped configuration, copied.
    fn config(&self) -> PathBuf {
        let dir = self.dir.path().join("gates");
        if !dir.exists() {
            copy_config(&dir, false);
        }
        dir
    }

    fn reports(&self) -> PathBuf {
        self.dir.path().join("reports")
    }

    fn journal(&self) -> PathBuf {
        self.reports().join("chaos-lab.journal")
    }

    /// `gates --config CONFIG --env-dir ENV ARGS... --reports REPORTS`.
    fn command(&self, config: &Path, args: &[&str]) -> Command {
        self.command_reporting_to(config, args, &self.reports())
    }

    /// The same, with the reports (and so the journal) in `reports`.
    fn command_reporting_to(&self, config: &Path, args: &[&str], reports: &Path) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gates"));
        cmd.current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env("CI", "1")
            .env_remove("GATES_LOG")
            .arg("--config")
            .arg(config)
            .arg("--env-dir")
            .arg(self.dir.path().join("env"))
            .args(args)
            .arg("--reports")
            .arg(reports);
        cmd
    }

    async fn run(&self, config: &Path, args: &[&str]) -> Output {
        let child = self
            .command(config, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gates starts");
        finish(child, Duration::from_secs(90)).await
    }

    /// The newest chaos report JSON.
    fn report(&self) -> Value {
        let mut reports: Vec<PathBuf> = std::fs::read_dir(self.reports())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("chaos-lab-") && name.ends_with("Z.json")
            })
            .collect();
        reports.sort();
        let path = reports.pop().expect("a chaos report");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The timeline a chaos report names.
    fn timeline(&self, report: &Value) -> Value {
        let file = self
            .reports()
            .join(report["timeline_file"].as_str().expect("a timeline file"));
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
    }

    fn junit(&self) -> PathBuf {
        self.dir.path().join("junit.xml")
    }

    /// Power requests the Proxmox API received: (verb, path).
    fn power_requests(&self) -> Vec<(String, String)> {
        self.lab
            .log
            .snapshot()
            .into_iter()
            .filter(|r| r.verb == "POST" && r.path.contains("/status/"))
            .map(|r| (r.verb, r.path))
            .collect()
    }

    fn vm_running(&self, vmid: u32) -> bool {
        self.lab.shared.read(|w| {
            w.node_by_vmid(vmid)
                .map(|n| w.nodes[n].vm_running)
                .unwrap_or(false)
        })
    }

    fn all_vms_running(&self) -> bool {
        self.lab
            .shared
            .read(|w| w.nodes.iter().all(|n| n.vm_running))
    }

    /// Wait (bounded) until the journal records a confirmed stop.
    async fn wait_for_stop(&self, deadline: Duration) {
        let until = Instant::now() + deadline;
        loop {
            let text = std::fs::read_to_string(self.journal()).unwrap_or_default();
            if text.contains("\"event\":\"stopped\"") {
                return;
            }
            assert!(
                Instant::now() < until,
                "no confirmed stop in the journal within {deadline:?}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Wait for a `gates` process, at most `limit`: a hung run is killed and fails the test
/// instead of hanging it.
async fn finish(child: std::process::Child, limit: Duration) -> Output {
    let pid = child.id();
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    match tokio::time::timeout(limit, waiting).await {
        Ok(done) => done.unwrap().expect("gates runs"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("gates did not finish within {limit:?}");
        }
    }
}

fn event_kinds(timeline: &Value) -> Vec<&str> {
    timeline["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect()
}

fn seconds(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn probe<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == name)
        .unwrap_or_else(|| panic!("no probe {name} in {report:#}"))
}

/// The probe's measured intervals against the lab's ground truth for `key`, on the run's
/// timeline, within one sample interval plus 100 ms at each end.
fn assert_matches_truth(bench: &Bench, report: &Value, probe_name: &str, key: &str) {
    let started = chrono::DateTime::parse_from_rfc3339(report["started_at"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    let lab_start = bench.lab.shared.read(|w| w.clock.start_wall());
    let offset = (started - lab_start).num_microseconds().unwrap() as f64 / 1e6;
    let truth = bench.lab.ground_truth();
    let target = truth
        .targets
        .get(key)
        .unwrap_or_else(|| panic!("no target {key}"));
    let expected: Vec<(f64, f64)> = target
        .outages
        .iter()
        .map(|o| {
            (
                o.start_real_seconds - offset,
                o.end_real_seconds.expect("the outage ended") - offset,
            )
        })
        .collect();
    let measured: Vec<(f64, f64)> = probe(report, probe_name)["outages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (seconds(&i["start"]), seconds(&i["end"])))
        .collect();
    let interval = seconds(&report["sample_interval"]);
    assert!(interval > 0.0 && interval <= 0.2, "{interval}");
    let tolerance = interval + 0.1;
    assert_eq!(
        measured.len(),
        expected.len(),
        "{probe_name}: measured {measured:?}, ground truth {expected:?}"
    );
    assert!(!expected.is_empty(), "{key}: the fault caused no outage");
    for (m, e) in measured.iter().zip(&expected) {
        eprintln!(
            "{probe_name}: measured [{:.3}, {:.3}) ground truth [{:.3}, {:.3}) differences {:+.3}s {:+.3}s",
            m.0,
            m.1,
            e.0,
            e.1,
            m.0 - e.0,
            m.1 - e.1
        );
        assert!(
            (m.0 - e.0).abs() <= tolerance && (m.1 - e.1).abs() <= tolerance,
            "{probe_name}: measured [{:.3}, {:.3}) vs ground truth [{:.3}, {:.3})",
            m.0,
            m.1,
            e.0,
            e.1
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_run_on_adr_007_passes_and_measures_what_the_lab_did() {
    let bench = Bench::start("adr-007", 211).await;
    let leader_on_pve1 = bench.lab.shared.read(|w| {
        w.etcd_leader(0)
            .is_some_and(|n| w.nodes[n].name == "talos-lab-cp-01")
    });
    let junit = bench.junit();
    let out = bench
        .run(
            &bench.config(),
            &[
                "chaos",
                "lab",
                "--host",
                "worst",
                "--junit",
                junit.to_str().unwrap(),
            ],
        )
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{o}\nstderr:\n{e}");
    // The plan came first, then one trial per probe, recovery and no manual work.
    assert!(
        o.contains("Chaos plan for lab") && o.contains("vmid 101 talos-lab-cp-01"),
        "{o}"
    );
    for trial in [
        "api-vip-new-connection",
        "api-vip-kept-alive",
        "ingress::whoami.lab.internal",
        "workloads::coredns",
        "workloads::traefik",
        "workloads::cilium-operator",
        "etcd-quorum",
        "recovery",
        "no-manual-work",
    ] {
        crate::support::assert_trial(&o, &format!("gate4::lab::chaos::{trial}"), "ok");
    }
    // The closing lines say who took over.
    assert!(
        o.contains("handovers (seconds after the start):")
            && o.contains("s API VIP: talos-lab-cp-01 -> nobody"),
        "{o}"
    );
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("classname=\"adr007.gate4\""), "{xml}");
    assert!(xml.contains("name=\"host\" value=\"pve1\""), "{xml}");
    assert!(
        xml.contains("name=\"handovers\" value=\"")
            && xml.contains("api-vip-holder-changed api-vip: talos-lab-cp-01 -&gt; nobody"),
        "{xml}"
    );
    assert!(
        xml.contains("name=\"outage.api-vip-new-connection\""),
        "{xml}"
    );

    let report = bench.report();
    assert_eq!(report["host"], "pve1");
    assert_eq!(report["verdict"], "pass");
    let choice = report["host_choice"].as_str().unwrap();
    assert!(
        choice.contains("talos-lab-cp-01 holds the API VIP")
            && choice.contains("held by talos-lab-cp-01"),
        "{choice}"
    );
    assert_matches_truth(&bench, &report, "api-vip-new-connection", "api/lab");
    assert_matches_truth(
        &bench,
        &report,
        "ingress::whoami.lab.internal",
        "ingress/lab/whoami.lab.internal",
    );
    assert_workloads_unseen_only_while_the_api_was_down(&report);
    // The plan showed the prediction, and the report holds it beside the measurement: every
    // probe the model makes a claim about measured what it predicted.
    assert!(
        o.contains("prediction: degraded")
            && o.contains("expected: the API VIP moves from talos-lab-cp-01"),
        "{o}"
    );
    let prediction = &report["prediction"];
    assert_eq!(prediction["host"], "pve1", "{prediction:#}");
    for probe in prediction["probes"].as_array().unwrap() {
        assert_ne!(probe["agrees"], false, "predicted vs measured: {probe:#}");
    }
    let api = prediction["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "api-vip-new-connection")
        .unwrap();
    assert_eq!(api["agrees"], true, "{api:#}");
    assert!(
        !prediction["pods"].as_array().unwrap().is_empty(),
        "the pods of talos-lab-cp-01 are predicted: {prediction:#}"
    );
    // The timeline holds the samples and what the cluster did.
    let timeline = bench.timeline(&report);
    let kinds = event_kinds(&timeline);
    for kind in [
        "vm-stop-requested",
        "node-not-ready",
        "lease-holder-changed",
        "api-vip-holder-changed",
        "vms-running",
        "recovered",
    ] {
        assert!(kinds.contains(&kind), "no {kind} event in {kinds:?}");
    }
    // The VIP left the stopped node and landed on another control plane.
    let moves: Vec<&str> = timeline["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "api-vip-holder-changed")
        .filter_map(|e| e["detail"].as_str())
        .collect();
    assert_eq!(
        moves.first(),
        Some(&"talos-lab-cp-01 -> nobody"),
        "{moves:?}"
    );
    assert!(
        moves
            .iter()
            .any(|m| m.starts_with("nobody -> talos-lab-cp-0") && !m.ends_with("cp-01")),
        "{moves:?}"
    );
    // The etcd probe sees the leader move exactly when the leader's host went down.
    assert_eq!(
        kinds.contains(&"etcd-leader-changed"),
        leader_on_pve1,
        "leader on pve1: {leader_on_pve1}; events {kinds:?}"
    );
    // Exactly one stop and one start, both of VM 101.
    let power = bench.power_requests();
    assert_eq!(power.len(), 2, "{power:?}");
    assert!(
        power.iter().all(|(_, p)| p.contains("/qemu/101/status/")),
        "{power:?}"
    );
    assert!(bench.all_vms_running());

    // `gates check` now reports gate 4 from this run.
    let out = bench
        .run(&bench.config(), &["check", "lab", "chaos-report"])
        .await;
    crate::support::assert_trial(&stdout(&out), "gate4::lab::chaos-report", "ok");
    bench.lab.stop().await;
}

/// The VIP's host went down: the workloads, read through the API, could not be seen while
/// it was down. With the default workloads budget (none), that time is the API outage's,
/// stated in each workloads trial, never "available throughout".
fn assert_workloads_unseen_only_while_the_api_was_down(report: &Value) {
    let workloads: Vec<&Value> = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["probe"].as_str().unwrap().starts_with("workloads::"))
        .collect();
    assert!(workloads.len() >= 3, "{report:#}");
    let mut unseen = 0;
    for w in workloads {
        assert_eq!(
            seconds(&w["budget_longest"]),
            0.0,
            "the default budget: {w:#}"
        );
        assert_eq!(w["finding"]["verdict"], "pass", "{w:#}");
        let unknown = w["unknown"].as_array().unwrap();
        assert_eq!(
            Some(unknown),
            w.get("unknown_during_api_outage")
                .and_then(Value::as_array)
                .or(Some(&vec![])),
            "every unknown interval lies in an API outage: {w:#}"
        );
        let summary = w["finding"]["summary"].as_str().unwrap();
        if !unknown.is_empty() {
            unseen += 1;
            assert!(
                summary.contains("while the API was down")
                    && !summary.contains("available throughout"),
                "{summary}"
            );
        }
    }
    assert!(
        unseen > 0,
        "the workloads could not be read while the API was down: {report:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_a_host_without_the_vip_sees_the_workloads_throughout_and_passes() {
    let bench = Bench::start("adr-007", 222).await;
    let holder = bench
        .lab
        .shared
        .read(|w| w.envs[0].vip_holder.map(|h| w.nodes[h].name.clone()))
        .expect("the lab's VIP has a holder");
    // talos-lab-cp-0N runs on pveN: take a host whose control plane does not hold the VIP.
    let host = (1..=3)
        .map(|n| (format!("pve{n}"), format!("talos-lab-cp-0{n}")))
        .find(|(_, node)| *node != holder)
        .map(|(host, _)| host)
        .unwrap();
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", &host])
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{o}\nstderr:\n{e}");
    let report = bench.report();
    assert_eq!(report["host"], host.as_str());
    assert!(
        probe(&report, "api-vip-new-connection")["outages"]
            .as_array()
            .unwrap()
            .is_empty(),
        "the API stays up: {report:#}"
    );
    for name in ["coredns", "traefik", "cilium-operator"] {
        let w = probe(&report, &format!("workloads::{name}"));
        assert_eq!(w["finding"]["verdict"], "pass", "{w:#}");
        assert_eq!(seconds(&w["budget_longest"]), 0.0, "{w:#}");
        assert!(
            w.get("unknown_during_api_outage").is_none(),
            "no API outage to blame: {w:#}"
        );
    }
    assert!(bench.all_vms_running());
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_l2_policy_on_one_node_fails_the_ingress_budget_when_its_host_goes_down() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("l2-one-node.yaml");
    std::fs::write(
        &scenario,
        "name: adr-007-l2-one-node\n\
         description: adr-007 with the L2 policy selecting only talos-lab-cp-01.\n\
         extends: adr-007\n\
         set:\n  environments[name=lab].l2_policies[name=ingress-address].node_selector:\n    matchLabels: { kubernetes.io/hostname: talos-lab-cp-01 }\n",
    )
    .unwrap();
    let bench = Bench::start(scenario.to_str().unwrap(), 212).await;
    // Gate 3 would refuse this cluster in preflight, and the prediction says losing pve1 is
    // not survivable; this test measures what chaos finds when neither stops it.
    let config = dir.path().join("gates");
    copy_config(&config, true);
    let junit = bench.junit();
    let out = bench
        .run(
            &config,
            &[
                "chaos",
                "lab",
                "--host",
                "pve1",
                "--expect-failure",
                "--junit",
                junit.to_str().unwrap(),
            ],
        )
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "stdout:\n{o}\nstderr:\n{e}");
    crate::support::assert_trial(
        &o,
        "gate4::lab::chaos::ingress::whoami.lab.internal",
        "FAILED",
    );
    crate::support::assert_trial(&o, "gate4::lab::chaos::no-manual-work", "ok");
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    let failure = xml
        .split("<testcase")
        .skip(1)
        .find(|c| c.contains("ingress::whoami.lab.internal"))
        .unwrap();
    assert!(
        failure.contains("<failure") && failure.contains("over the budget"),
        "{failure}"
    );
    assert!(
        failure.contains("down ["),
        "the intervals are in the failure body: {failure}"
    );
    let report = bench.report();
    assert!(
        o.contains("prediction: lost")
            && o.contains("not survivable: Service traefik/traefik loses its ingress address"),
        "{o}"
    );
    let predicted = report["prediction"]["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "ingress::whoami.lab.internal")
        .unwrap();
    assert_eq!(predicted["predicted"], "down: no surviving announcer");
    assert_eq!(predicted["agrees"], true, "{predicted:#}");
    let ingress = probe(&report, "ingress::whoami.lab.internal");
    assert!(
        seconds(&ingress["longest"]) > seconds(&ingress["budget_longest"]),
        "{ingress:#}"
    );
    assert!(bench.all_vms_running(), "restored after the budget broke");
    bench.lab.stop().await;
}

/// The Proxmox host of the node that runs staging's database pod.
fn database_host(bench: &Bench) -> String {
    bench.lab.shared.read(|w| {
        let e = &w.envs[0];
        let wi = e
            .workloads
            .iter()
            .position(|x| x.spec.name == "whoami-db")
            .expect("the database");
        let node = e
            .pods
            .values()
            .find(|p| p.workload == wi)
            .and_then(|p| p.node)
            .expect("its pod is placed");
        w.hosts[w.nodes[node].host].name.clone()
    })
}

/// The `no-manual-work` trial of the newest report.
fn no_manual_work(report: &Value) -> Value {
    report["trials"]
        .as_array()
        .expect("trials")
        .iter()
        .find(|t| t["name"] == "gate4::lab::chaos::no-manual-work")
        .cloned()
        .unwrap_or_else(|| panic!("no no-manual-work trial: {report:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_left_terminating_on_its_read_write_once_volume_fails_no_manual_work_as_predicted()
 {
    let bench = Bench::start("adr-007-rwo-deployment", 227).await;
    let host = database_host(&bench);
    // Without --expect-failure the prediction refuses the run.
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", &host])
        .await;
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("node-down-pod-deletion-policy `do-nothing`") && e.contains("--expect-failure"),
        "{e}"
    );
    assert!(bench.power_requests().is_empty(), "nothing was touched");
    let out = bench
        .run(
            &bench.config(),
            &["chaos", "lab", "--host", &host, "--expect-failure"],
        )
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "stdout:\n{o}\nstderr:\n{e}");
    crate::support::assert_trial(&o, "gate4::lab::chaos::no-manual-work", "FAILED");
    let trial = no_manual_work(&bench.report());
    assert_eq!(trial["verdict"], "fail", "{trial:#}");
    assert!(
        trial["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("the loss of {host} needed manual work: 1 pod(s)")),
        "{trial:#}"
    );
    let evidence = trial["evidence"].to_string();
    assert!(
        evidence.contains("whoami/whoami-db-")
            && evidence.contains("stayed Terminating")
            && evidence.contains("pvc-3f1c2a4e-0b1d-4c55-9a51-2d7e8f0a1b01")
            && evidence.contains("`do-nothing`")
            && evidence.contains("delete-both-statefulset-and-deployment-pod"),
        "{trial:#}"
    );
    assert!(bench.all_vms_running(), "restored");
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_longhorns_delete_policy_the_same_loss_needs_no_manual_work() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("rwo-released.yaml");
    std::fs::write(
        &scenario,
        "name: rwo-released\nextends: adr-007-rwo-deployment\nset:\n  environments[name=lab].longhorn.settings:\n    node-down-pod-deletion-policy: delete-both-statefulset-and-deployment-pod\n",
    )
    .unwrap();
    let bench = Bench::start(scenario.to_str().unwrap(), 228).await;
    let host = database_host(&bench);
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", &host])
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    crate::support::assert_trial(&o, "gate4::lab::chaos::no-manual-work", "ok");
    let trial = no_manual_work(&bench.report());
    assert!(
        trial["evidence"][0]
            .as_str()
            .unwrap()
            .contains("no pod was left Terminating on the lost nodes"),
        "stdout:\n{o}\nstderr:\n{e}\n{trial:#}"
    );
    let forced = bench.lab.shared.read(|w| {
        w.truth
            .events
            .iter()
            .filter(|e| e.kind == "pod-force-deleted")
            .count()
    });
    assert_eq!(forced, 1, "Longhorn force-deleted the evicted pod");
    assert!(bench.all_vms_running(), "restored");
    bench.lab.stop().await;
}

/// The shipped gates and environments (not the lab files a developer's lab may have left
/// there), optionally without gate 3's l2-announcement check.
fn copy_config(to: &Path, without_l2_check: bool) {
    let from = root().join("gates");
    for sub in ["environments", "adr-007"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for entry in std::fs::read_dir(from.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("lab") || !name.ends_with(".yaml") {
                continue;
            }
            let mut text = std::fs::read_to_string(&path).unwrap();
            if without_l2_check && name == "3-ingress-address.yaml" {
                text = text.replace("  - kind: l2-announcement\n", "");
                assert!(!text.contains("l2-announcement\n"), "{text}");
            }
            std::fs::write(to.join(sub).join(name), text).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_refuses_on_staging_today_and_touches_nothing() {
    let bench = Bench::start("staging-today", 213).await;
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", "pve1"])
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "stdout:\n{o}\nstderr:\n{e}");
    assert!(e.contains("preflight refused the run on lab"), "{e}");
    assert!(e.contains("gate 1 does not pass"), "{e}");
    assert!(o.contains("preflight: REFUSED"), "{o}");
    assert!(
        bench.power_requests().is_empty(),
        "{:?}",
        bench.power_requests()
    );
    assert!(!bench.journal().exists(), "no journal without a run");
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_refuses_while_a_host_is_down() {
    let bench = Bench::start("adr-007", 214).await;
    bench.lab.shared.power_loss_host("pve5").unwrap();
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", "pve2"])
        .await;
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("Proxmox host already down: pve5"), "{e}");
    assert!(
        bench.power_requests().is_empty(),
        "{:?}",
        bench.power_requests()
    );
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_prints_the_plan_and_touches_nothing() {
    let bench = Bench::start("adr-007", 215).await;
    let out = bench
        .run(
            &bench.config(),
            &["chaos", "lab", "--host", "pve3", "--dry-run"],
        )
        .await;
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{}", stderr(&out));
    assert!(
        o.contains("vmid 103 talos-lab-cp-03 (node talos-lab-cp-03)"),
        "{o}"
    );
    assert!(
        o.contains("left running on pve3") && o.contains("201 talos-prod-cp-01 (lab-production)"),
        "{o}"
    );
    assert!(o.contains("Dry run: nothing was touched."), "{o}");
    // The whole-host mode is refused: pve3 also runs lab-production.
    let out = bench
        .run(
            &bench.config(),
            &[
                "chaos",
                "lab",
                "--host",
                "pve3",
                "--whole-host",
                "--dry-run",
            ],
        )
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--whole-host refused: pve3 also runs 201"),
        "{}",
        stderr(&out)
    );
    // Production needs --yes.
    let out = bench
        .run(&bench.config(), &["chaos", "lab-production", "--dry-run"])
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("needs --yes"), "{}", stderr(&out));
    assert!(bench.power_requests().is_empty());
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_the_outage_then_recover_leaves_every_vm_running() {
    let bench = Bench::start("adr-007", 216).await;
    let mut child = bench
        .command(&bench.config(), &["chaos", "lab", "--host", "pve2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    bench.wait_for_stop(Duration::from_secs(30)).await;
    child.kill().unwrap(); // SIGKILL
    let _ = finish(child, Duration::from_secs(30)).await;
    assert!(!bench.vm_running(102), "the killed run left VM 102 stopped");
    // No new run while the journal owes a restore.
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", "pve1"])
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("run `gates recover lab` first"),
        "{}",
        stderr(&out)
    );

    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("VM 102 talos-lab-cp-02 (node talos-lab-cp-02) is running"));
    assert!(bench.all_vms_running());
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(journal.contains("recovered by gates recover"), "{journal}");

    // Safe twice: nothing left to start, no further power request.
    let before = bench.power_requests().len();
    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nothing was stopped"),
        "{}",
        stdout(&out)
    );
    assert_eq!(bench.power_requests().len(), before);
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_during_the_outage_restores_before_exit_and_spares_the_other_environment() {
    let bench = Bench::start("adr-007", 217).await;
    let child = bench
        .command(&bench.config(), &["chaos", "lab", "--host", "pve3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    bench.wait_for_stop(Duration::from_secs(30)).await;
    assert!(!bench.vm_running(103));
    // Neither a recovery nor a second run may race the live run.
    for args in [
        &["recover", "lab"][..],
        &["chaos", "lab", "--host", "pve1"][..],
    ] {
        let out = bench.run(&bench.config(), args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "a chaos run on lab is in progress (pid {})",
                child.id()
            )),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(
        !bench.vm_running(103),
        "the live run still owns the restore"
    );
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = finish(child, Duration::from_secs(60)).await;
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(bench.vm_running(103), "restored before exit");
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(journal.contains("\"event\":\"restored\""), "{journal}");
    assert!(journal.contains("interrupted by SIGINT"), "{journal}");
    // pve3 also runs lab-production's VM 201: no request ever named it.
    let power = bench.power_requests();
    assert!(!power.is_empty());
    assert!(
        power.iter().all(|(_, p)| p.contains("/qemu/103/status/")),
        "only VM 103 was touched: {power:?}"
    );
    assert!(bench.vm_running(201));
    bench.lab.stop().await;
}

#[test]
fn the_nightly_ci_examples_run_chaos_then_always_recover_and_keep_the_junit() {
    let read = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(root().join("examples/ci").join(name)).unwrap();
        gates_core::yaml::from_str(&text).unwrap()
    };
    let github = read("github-actions-nightly-chaos.yml");
    let steps = github["jobs"]["chaos"]["steps"].as_array().unwrap();
    let run_of = |s: &serde_json::Value| s["run"].as_str().unwrap_or_default().to_string();
    let chaos = steps
        .iter()
        .position(|s| run_of(s).contains("gates chaos staging --host auto --junit"))
        .expect("a chaos step");
    let recover = steps
        .iter()
        .position(|s| run_of(s).contains("gates recover staging"))
        .expect("a recover step");
    assert!(recover > chaos);
    assert_eq!(steps[recover]["if"].as_str(), Some("always()"));
    let upload = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact"))
        })
        .expect("an upload step");
    assert_eq!(upload["if"].as_str(), Some("always()"));
    assert!(
        upload["with"]["path"]
            .as_str()
            .unwrap()
            .contains("reports/*.xml")
    );

    let gitlab = read("gitlab-ci-nightly-chaos.yml");
    let job = &gitlab["chaos:staging"];
    let script: Vec<&str> = job["script"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    assert!(
        script.iter().any(
            |s| s.contains("gates chaos staging --host auto --junit reports/chaos-staging.xml")
        )
    );
    assert!(
        job["after_script"][0]
            .as_str()
            .unwrap()
            .contains("gates recover staging")
    );
    assert_eq!(job["artifacts"]["when"].as_str(), Some("always"));
    assert_eq!(
        job["artifacts"]["reports"]["junit"][0].as_str(),
        Some("reports/chaos-staging.xml")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_the_outage_restores_and_exits_143() {
    let bench = Bench::start("adr-007", 218).await;
    let leader = bench
        .lab
        .shared
        .read(|w| w.etcd_leader(0).map(|n| w.nodes[n].name.clone()));
    assert_eq!(
        leader.as_deref(),
        Some("talos-lab-cp-02"),
        "the scenario's etcd leader"
    );
    let child = bench
        .command(&bench.config(), &["chaos", "lab", "--host", "pve2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    bench.wait_for_stop(Duration::from_secs(30)).await;
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = finish(child, Duration::from_secs(60)).await;
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(bench.all_vms_running(), "restored before exit");
    assert!(
        stderr(&out).contains("restoring: SIGTERM received"),
        "{}",
        stderr(&out)
    );
    // pve2 carried the etcd leader: the etcd probe saw it move.
    let report = bench.report();
    assert_eq!(report["outcome"], "interrupted by SIGTERM; restored");
    let timeline: Value = serde_json::from_str(
        &std::fs::read_to_string(
            bench
                .reports()
                .join(report["timeline_file"].as_str().unwrap()),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(
        timeline["events"].as_array().unwrap().iter().any(|e| {
            e["kind"] == "etcd-leader-changed"
                && e["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("talos-lab-cp-02 -> ")
        }),
        "{:#}",
        timeline["events"]
    );
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_down_before_the_fault_aborts_without_touching_anything() {
    let bench = Bench::start("adr-007", 219).await;
    // The same environment, but its ingress URL asks for a host the ingress does not serve.
    let env_dir = bench.dir.path().join("env");
    let text = std::fs::read_to_string(env_dir.join("lab.yaml")).unwrap();
    assert!(text.contains("host: whoami.lab.internal"), "{text}");
    std::fs::write(
        env_dir.join("lab.yaml"),
        text.replace("host: whoami.lab.internal", "host: nobody.lab.internal"),
    )
    .unwrap();
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", "pve2"])
        .await;
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{}\n{e}", stdout(&out));
    assert!(
        e.contains("steady state not met, nothing was touched"),
        "{e}"
    );
    assert!(e.contains("ingress::nobody.lab.internal is down"), "{e}");
    assert!(
        bench.power_requests().is_empty(),
        "{:?}",
        bench.power_requests()
    );
    // The journal says the run ended before the fault, so the next run is not blocked.
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(journal.contains("aborted before the fault"), "{journal}");
    bench.lab.stop().await;
}

/// POSTs that power a Proxmox host: (server address, path).
fn host_power_requests(bench: &Bench) -> Vec<(String, String)> {
    bench
        .lab
        .log
        .snapshot()
        .into_iter()
        .filter(|r| {
            r.verb == "POST" && (r.path.ends_with("/status") || r.path.ends_with("/wakeonlan"))
        })
        .map(|r| (r.server, r.path))
        .collect()
}

fn host_online(bench: &Bench, name: &str) -> bool {
    bench
        .lab
        .shared
        .read(|w| w.host_by_name(name).is_some_and(|h| w.hosts[h].online))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_host_shuts_the_host_down_and_wakes_it_through_another_host() {
    let bench = Bench::start("adr-007", 207).await;
    let pve2 = bench.lab.plan.host_ip(1);
    // pve1 is the host behind `proxmox.url`: the run must act through a fallback URL.
    let out = bench
        .run(
            &bench.config(),
            &["chaos", "lab", "--host", "pve1", "--whole-host"],
        )
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{o}\nstderr:\n{e}");
    assert!(
        o.contains("mode: whole host: its VMs are hard-stopped, then pve1 is shut down"),
        "{o}"
    );
    assert!(
        o.contains(&format!(
            "wake: wake-on-LAN 52:54:00:00:00:00 sent by pve2 (https://{pve2}:8006)"
        )),
        "{o}"
    );
    crate::support::assert_trial(&o, "gate4::lab::chaos::no-manual-work", "ok");
    crate::support::assert_trial(&o, "gate4::lab::chaos::recovery", "ok");

    // One shutdown and one wake of pve1, both sent to pve2's API; nothing to pve1's own.
    let host_power = host_power_requests(&bench);
    assert_eq!(
        host_power,
        vec![
            (
                format!("{pve2}:8006"),
                "/api2/json/nodes/pve1/status".to_string()
            ),
            (
                format!("{pve2}:8006"),
                "/api2/json/nodes/pve1/wakeonlan".to_string()
            ),
        ],
        "{host_power:?}"
    );
    let vm_power = bench.power_requests();
    assert_eq!(vm_power.len(), 2, "{vm_power:?}");
    assert!(
        vm_power
            .iter()
            .all(|(_, p)| p.contains("/qemu/101/status/")),
        "{vm_power:?}"
    );

    // The lab really took the host down and back.
    let truth: Vec<String> = bench.lab.shared.read(|w| {
        w.truth
            .events
            .iter()
            .map(|e| format!("{} {}", e.kind, e.subject))
            .collect()
    });
    for kind in ["host-shutdown-requested pve1", "host-wake-requested pve1"] {
        assert!(truth.iter().any(|t| t == kind), "no `{kind}` in {truth:?}");
    }
    assert!(host_online(&bench, "pve1") && bench.all_vms_running());

    let report = bench.report();
    assert_eq!(report["mode"], "whole-host");
    let actions: Vec<&str> = report["power_actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect();
    assert_eq!(actions, vec!["stop", "host-shutdown", "host-wake", "start"]);
    let timeline = bench.timeline(&report);
    let kinds = event_kinds(&timeline);
    for kind in [
        "host-shutdown-requested",
        "host-offline",
        "host-wake-requested",
        "host-online",
    ] {
        assert!(kinds.contains(&kind), "no {kind} event in {kinds:?}");
    }
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_host_is_refused_without_another_hosts_api_and_recovers_after_sigkill() {
    let bench = Bench::start("adr-007", 208).await;
    // Without fallback URLs, pve1 (behind `url`) could not be woken: refused, nothing touched.
    let env_file = bench.dir.path().join("env/lab.yaml");
    let original = std::fs::read_to_string(&env_file).unwrap();
    let without: String = original
        .lines()
        .filter(|l| !l.trim_start().starts_with("fallback_urls:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without, original, "the lab writes fallback_urls");
    std::fs::write(&env_file, &without).unwrap();
    let out = bench
        .run(
            &bench.config(),
            &[
                "chaos",
                "lab",
                "--host",
                "pve1",
                "--whole-host",
                "--dry-run",
            ],
        )
        .await;
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--whole-host needs the Proxmox API of a host other than pve1")
            && e.contains(&format!(
                "https://{}:8006 is served by pve1 itself",
                bench.lab.plan.host_ip(0)
            ))
            && e.contains("proxmox.fallback_urls"),
        "{e}"
    );
    std::fs::write(&env_file, &original).unwrap();

    // Killed while the host is off: `gates recover` wakes it, then starts the VM.
    let mut child = bench
        .command(
            &bench.config(),
            &["chaos", "lab", "--host", "pve2", "--whole-host"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(45);
    loop {
        let text = std::fs::read_to_string(bench.journal()).unwrap_or_default();
        if text.contains("\"event\":\"host-offline\"") {
            break;
        }
        assert!(
            Instant::now() < until,
            "the host never went offline:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    let _ = finish(child, Duration::from_secs(30)).await;
    assert!(!host_online(&bench, "pve2"));
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", "pve3"])
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("host pve2, 102 talos-lab-cp-02"),
        "{}",
        stderr(&out)
    );

    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{}", stderr(&out));
    assert!(
        o.contains("host pve2 is off: waking it through pve1"),
        "{o}"
    );
    assert!(
        o.contains("VM 102 talos-lab-cp-02 (node talos-lab-cp-02) is running"),
        "{o}"
    );
    assert!(host_online(&bench, "pve2") && bench.all_vms_running());
    // Safe twice: no further power request of any kind.
    let before = (
        host_power_requests(&bench).len(),
        bench.power_requests().len(),
    );
    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        (
            host_power_requests(&bench).len(),
            bench.power_requests().len()
        ),
        before
    );
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_host_is_refused_on_a_host_without_a_wake_on_lan_mac() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("no-wol.yaml");
    std::fs::write(
        &scenario,
        "name: adr-007-no-wol\n\
         description: adr-007 with no wake-on-LAN MAC on pve2.\n\
         extends: adr-007\n\
         set:\n  hosts[name=pve2].wakeonlan: false\n",
    )
    .unwrap();
    let bench = Bench::start(scenario.to_str().unwrap(), 209).await;
    let out = bench
        .run(
            &bench.config(),
            &[
                "chaos",
                "lab",
                "--host",
                "pve2",
                "--whole-host",
                "--dry-run",
            ],
        )
        .await;
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--whole-host refused: pve2 has no wake-on-LAN MAC in its node config")
            && e.contains("pvenode config set -wakeonlan"),
        "{e}"
    );
    // pve1 has one: its dry run prints the plan with the wake path.
    let out = bench
        .run(
            &bench.config(),
            &[
                "chaos",
                "lab",
                "--host",
                "pve1",
                "--whole-host",
                "--dry-run",
            ],
        )
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("wake: wake-on-LAN 52:54:00:00:00:00 sent by pve2"));
    assert!(bench.power_requests().is_empty() && host_power_requests(&bench).is_empty());
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_with_other_reports_is_refused_here_by_the_lock_and_elsewhere_by_the_lease() {
    let bench = Bench::start("adr-007", 221).await;
    let child = bench
        .command(&bench.config(), &["chaos", "lab", "--host", "pve3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    bench.wait_for_stop(Duration::from_secs(30)).await;
    let elsewhere = bench.dir.path().join("other-machine");
    let output = |mut cmd: Command| async move {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        finish(child, Duration::from_secs(60)).await
    };
    // This machine, another --reports (so another journal): the environment's lock refuses.
    let other = bench.dir.path().join("other-reports");
    let out = output(bench.command_reporting_to(
        &bench.config(),
        &["chaos", "lab", "--host", "pve1"],
        &other,
    ))
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "a chaos run on lab is in progress (pid {})",
            child.id()
        )),
        "{}",
        stderr(&out)
    );
    // Another machine (its own locks, its own reports): the cluster's Lease refuses.
    let mut cmd = bench.command_reporting_to(
        &bench.config(),
        &["chaos", "lab", "--host", "pve1"],
        &elsewhere.join("reports"),
    );
    cmd.env("GATES_LOCK_DIR", elsewhere.join("locks"));
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a chaos run on lab is in progress elsewhere: the Lease kube-system/gates-chaos is held by gates-chaos"),
        "{}",
        stderr(&out)
    );
    // The same cluster under another environment name (a copy of lab.yaml): one Lease per
    // cluster, so it is refused too, naming the run's environment.
    let envs = bench.dir.path().join("env");
    std::fs::copy(envs.join("lab.yaml"), envs.join("labtwin.yaml")).unwrap();
    let out = output(bench.command_reporting_to(
        &bench.config(),
        &["chaos", "labtwin", "--host", "pve1"],
        &bench.dir.path().join("twin-reports"),
    ))
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the Lease kube-system/gates-chaos is held by gates-chaos")
            && stderr(&out).contains("(environment lab)"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(envs.join("labtwin.yaml")).unwrap();
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = finish(child, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    // Only the first run's VM was ever touched, and it runs again.
    let power = bench.power_requests();
    assert!(
        power.iter().all(|(_, p)| p.contains("/qemu/103/status/")),
        "{power:?}"
    );
    assert!(bench.all_vms_running());
    // The run gave its Lease up and the journal says so; the report says it was interrupted.
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(
        journal.contains("\"event\":\"lease-taken\"")
            && journal.contains("\"event\":\"lease-released\""),
        "{journal}"
    );
    let report = bench.report();
    assert_eq!(report["interrupted"], "SIGINT");
    let manual = report["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "gate4::lab::chaos::no-manual-work")
        .unwrap();
    assert!(
        manual["summary"]
            .as_str()
            .is_some_and(|s| s.contains("the only other write was the run's Lease")),
        "{manual}"
    );
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_loss_predicted_fatal_is_refused_before_anything_is_touched() {
    let bench = Bench::start("adr-007-l2-one-node", 210).await;
    let config = bench.dir.path().join("gates-without-l2");
    copy_config(&config, true);
    let out = bench
        .run(&config, &["chaos", "lab", "--host", "pve1"])
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "stdout:\n{o}\nstderr:\n{e}");
    assert!(
        e.contains("the prediction says losing pve1 is not survivable: Service traefik/traefik loses its ingress address")
            && e.contains("--expect-failure"),
        "{e}"
    );
    assert!(o.contains("prediction: lost"), "the plan shows why: {o}");
    assert!(bench.power_requests().is_empty(), "nothing was touched");
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_after_taking_the_lease_is_freed_by_recover() {
    let bench = Bench::start("adr-007", 223).await;
    let mut child = bench
        .command(&bench.config(), &["chaos", "lab", "--host", "pve2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed during the baseline: the Lease is taken and journaled, nothing is stopped yet.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(bench.journal()).unwrap_or_default();
        if text.contains("\"event\":\"lease-taken\"") {
            assert!(!text.contains("stop-requested"), "{text}");
            break;
        }
        assert!(
            Instant::now() < until,
            "no lease-taken in the journal:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap(); // SIGKILL
    let _ = finish(child, Duration::from_secs(30)).await;
    assert!(bench.all_vms_running());
    // A new run is refused by the dead run's Lease, and told who holds it, until when, and
    // what frees it.
    let out = bench
        .run(
            &bench.config(),
            &["chaos", "lab", "--host", "pve1", "--dry-run"],
        )
        .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let refused = stderr(&out);
    for want in [
        "the Lease kube-system/gates-chaos is held by gates-chaos",
        "until 20",
        "`gates recover lab` frees it",
    ] {
        assert!(refused.contains(want), "{want:?} missing from {refused}");
    }

    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("released the run's Lease kube-system/gates-chaos"),
        "{}",
        stdout(&out)
    );
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(
        journal.contains("\"event\":\"lease-released\""),
        "{journal}"
    );
    // Admitted now.
    let out = bench
        .run(
            &bench.config(),
            &["chaos", "lab", "--host", "pve1", "--dry-run"],
        )
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("Dry run: nothing was touched"));
    assert!(
        bench.power_requests().is_empty(),
        "{:?}",
        bench.power_requests()
    );
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxmox_api_stalled_at_restore_is_outlasted_and_the_vms_run_again() {
    let bench = Bench::start("adr-007", 224).await;
    // Requests give up after 2 s; the API stalls 5 s from the first start request.
    bench.proxmox_timeout("2s");
    bench
        .lab
        .proxmox
        .stall_at_next_start(Duration::from_secs(5));
    let holder = bench
        .lab
        .shared
        .read(|w| w.envs[0].vip_holder.map(|h| w.nodes[h].name.clone()))
        .expect("the lab's VIP has a holder");
    let host = (1..=3)
        .map(|n| (format!("pve{n}"), format!("talos-lab-cp-0{n}")))
        .find(|(_, node)| *node != holder)
        .map(|(host, _)| host)
        .unwrap();
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", &host])
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(bench.all_vms_running(), "stdout:\n{o}\nstderr:\n{e}");
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(
        journal.contains("\"action\":\"start\"") && journal.contains("\"event\":\"restored\""),
        "the first start failed, a retry started it: {journal}"
    );
    // Exit per the verdict: the retried start is no manual work.
    let report = bench.report();
    let code = match report["verdict"].as_str() {
        Some("pass") => 0,
        other => panic!("verdict {other:?}: stdout:\n{o}\nstderr:\n{e}"),
    };
    assert_eq!(out.status.code(), Some(code), "stdout:\n{o}\nstderr:\n{e}");
    crate::support::assert_trial(&o, "gate4::lab::chaos::no-manual-work", "ok");
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_while_it_retries_a_stalled_start_is_finished_by_recover() {
    let bench = Bench::start("adr-007", 225).await;
    bench.proxmox_timeout("2s");
    bench
        .lab
        .proxmox
        .stall_at_next_start(Duration::from_secs(60));
    let mut child = bench
        .command(&bench.config(), &["chaos", "lab", "--host", "pve2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first start gave up on the stalled API; the run is retrying it.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(bench.journal()).unwrap_or_default();
        if text.contains("\"action\":\"start\"") {
            break;
        }
        assert!(
            Instant::now() < until,
            "no failed start in the journal:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap(); // SIGKILL
    let _ = finish(child, Duration::from_secs(30)).await;
    assert!(!bench.vm_running(102), "the killed run left VM 102 stopped");
    bench.lab.proxmox.stall_for(Duration::ZERO);
    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(bench.all_vms_running());
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(journal.contains("recovered by gates recover"), "{journal}");
    assert!(
        journal.contains("\"event\":\"lease-released\""),
        "{journal}"
    );
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_waits_for_a_stop_the_dead_run_sent_before_it_judges_the_vm_running() {
    // Found by the kill campaign: killed between sending a stop and seeing it done, the run
    // left a stop task under way (the lab's, like Proxmox's, runs 3 s); a recover that came
    // in that window saw the VM running, settled the journal, and the VM went off after it.
    let bench = Bench::start("adr-007", 226).await;
    let mut child = bench
        .command(&bench.config(), &["chaos", "lab", "--host", "pve2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !bench
        .power_requests()
        .iter()
        .any(|(_, path)| path.ends_with("/qemu/102/status/stop"))
    {
        assert!(Instant::now() < until, "no stop was sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap(); // SIGKILL, the stop task still running
    let _ = finish(child, Duration::from_secs(30)).await;
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(
        !journal.contains("\"event\":\"stopped\""),
        "killed before the stop was seen done: {journal}"
    );
    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("a task for it is still under way"),
        "{}",
        stdout(&out)
    );
    // Past the stop task's end: the VM runs, started again by the recovery.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(bench.vm_running(102), "VM 102 is off after recover");
    bench.lab.stop().await;
}
