//! `gates chaos lab --fault partition`: the VMs run on while their links are pulled through
//! the lab's Proxmox API, then put back; and a run killed with the links pulled is put right
//! by `gates recover`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Bench, event_kinds, finish};
use crate::support::{stderr, stdout};

impl Bench {
    /// `net0`'s `link_down` of a VM, as the lab's Proxmox serves it.
    fn link_down(&self, vmid: u32) -> bool {
        self.lab.shared.read(|w| {
            let n = w.node_by_vmid(vmid).expect("a VM of the lab");
            w.nodes[n].link_down
        })
    }

    /// Config updates the Proxmox API received: the paths of the `PUT .../config` requests.
    fn config_updates(&self) -> Vec<String> {
        self.lab
            .log
            .snapshot()
            .into_iter()
            .filter(|r| r.verb == "PUT" && r.path.ends_with("/config"))
            .map(|r| r.path)
            .collect()
    }

    /// Wait (bounded) until the journal records a link read back down.
    async fn wait_for_link_down(&self, deadline: Duration) {
        let until = Instant::now() + deadline;
        loop {
            let text = std::fs::read_to_string(self.journal()).unwrap_or_default();
            if text.contains("\"event\":\"link-down\"") {
                return;
            }
            assert!(
                Instant::now() < until,
                "no link read back down in the journal within {deadline:?}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The lab's ground truth: whether any machine of the lab was stopped (a partition stops
/// none).
fn machines_stopped(bench: &Bench) -> Vec<String> {
    bench
        .lab
        .ground_truth()
        .events
        .iter()
        .filter(|e| e.kind == "vm-off" || e.kind == "machine-down")
        .map(|e| format!("{} {}", e.kind, e.subject))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_run_pulls_the_links_probes_puts_them_back_and_judges_with_split_brain_signals()
{
    let bench = Bench::start("adr-007", 205).await;
    let junit = bench.junit();
    let out = bench
        .run(
            &bench.config(),
            &[
                "chaos",
                "lab",
                "--fault",
                "partition",
                "--host",
                "pve1",
                "--junit",
                junit.to_str().unwrap(),
            ],
        )
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{o}\nstderr:\n{e}");
    // The plan's prediction is the partition's (the VIP holder is cut off), not a power loss's.
    assert!(
        o.contains("prediction: ") && o.contains("is cut off and stops announcing"),
        "{o}"
    );
    let report = bench.report();
    assert_eq!(report["mode"], "partition", "{report:#}");
    assert_eq!(report["host"], "pve1");
    assert_eq!(report["verdict"], "pass", "{report:#}");
    // One pull and one put-back of VM 101's net0, nothing else written, nothing stopped.
    let updates = bench.config_updates();
    assert_eq!(updates.len(), 2, "{updates:?}");
    assert!(
        updates
            .iter()
            .all(|p| p.ends_with("/nodes/pve1/qemu/101/config")),
        "{updates:?}"
    );
    assert!(
        bench.power_requests().is_empty(),
        "{:?}",
        bench.power_requests()
    );
    assert!(!bench.link_down(101), "the link is put back");
    assert!(bench.all_vms_running());
    assert_eq!(machines_stopped(&bench), Vec::<String>::new());
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    for event in [
        "link-down-requested",
        "link-down",
        "link-up-requested",
        "link-up",
    ] {
        assert!(
            journal.contains(&format!("\"event\":\"{event}\"")),
            "no {event} in the journal:\n{journal}"
        );
    }
    // The cut-off node went NotReady and the VIP it held moved on its lease timing.
    let timeline = bench.timeline(&report);
    let kinds = event_kinds(&timeline);
    for kind in ["node-not-ready", "api-vip-holder-changed", "recovered"] {
        assert!(kinds.contains(&kind), "no {kind} event in {kinds:?}");
    }
    assert_split_brain_judged_clean(&report);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("name=\"gate4::lab::chaos::split-brain::api-vip\"")
            && xml.contains("name=\"gate4::lab::chaos::split-brain::l2-announcement\"")
            && xml.contains("name=\"gate4::lab::chaos::split-brain::etcd-minority\""),
        "{xml}"
    );
    bench.lab.stop().await;
}

/// The report's `split_brain` section: the three signals, each judged `pass` from what it read.
fn assert_split_brain_judged_clean(report: &Value) {
    let section = report["split_brain"]
        .as_array()
        .unwrap_or_else(|| panic!("no split_brain section: {report:#}"));
    let names: Vec<&str> = section
        .iter()
        .filter_map(|s| s["signal"].as_str())
        .collect();
    assert_eq!(
        names,
        vec!["api-vip", "l2-announcement", "etcd-minority"],
        "{section:#?}"
    );
    for signal in section {
        assert_eq!(signal["finding"]["verdict"], "pass", "{signal:#}");
        assert!(
            signal["samples"].as_u64().unwrap_or(0) > 0,
            "judged from samples: {signal:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_run_killed_with_the_links_pulled_is_put_back_by_recover() {
    let bench = Bench::start("adr-007", 206).await;
    let mut child = bench
        .command(
            &bench.config(),
            &["chaos", "lab", "--fault", "partition", "--host", "pve2"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    bench.wait_for_link_down(Duration::from_secs(30)).await;
    child.kill().unwrap(); // SIGKILL
    let _ = finish(child, Duration::from_secs(30)).await;
    assert!(
        bench.link_down(102),
        "the killed run left VM 102's link pulled"
    );
    assert!(bench.vm_running(102), "a partition stops nothing");
    // No new run while the journal owes a link.
    let out = bench
        .run(&bench.config(), &["chaos", "lab", "--host", "pve1"])
        .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("run `gates recover lab` first"),
        "{}",
        stderr(&out)
    );

    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{o}\nstderr:\n{e}");
    assert!(!bench.link_down(102), "recover put net0 back: link_down=0");
    assert!(bench.all_vms_running());
    assert!(
        bench.power_requests().is_empty(),
        "{:?}",
        bench.power_requests()
    );
    let journal = std::fs::read_to_string(bench.journal()).unwrap();
    assert!(journal.contains("\"event\":\"link-up\""), "{journal}");
    assert!(journal.contains("recovered by gates recover"), "{journal}");

    // Safe twice: nothing owed, nothing written.
    let before = bench.config_updates().len();
    let out = bench.run(&bench.config(), &["recover", "lab"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(bench.config_updates().len(), before);
    bench.lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_node_that_keeps_the_vip_its_lease_and_takes_writes_fails_each_split_brain_signal()
 {
    let bench = Bench::start("adr-007", 220).await;
    bench
        .lab
        .shared
        .change(|w, _| w.misbehave = gates_lab::world::Misbehaviour::ALL);
    let out = bench
        .run(
            &bench.config(),
            &["chaos", "lab", "--fault", "partition", "--host", "pve1"],
        )
        .await;
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "stdout:\n{o}\nstderr:\n{e}");
    let report = bench.report();
    assert_eq!(report["mode"], "partition");
    assert_eq!(report["verdict"], "fail", "{report:#}");
    let section = report["split_brain"]
        .as_array()
        .expect("a split_brain section");
    for signal in section {
        assert_eq!(signal["finding"]["verdict"], "fail", "{signal:#}");
        let evidence = signal["finding"]["evidence"].to_string();
        assert!(evidence.contains("talos-lab-cp-01"), "{signal:#}");
    }
    let vip = section.iter().find(|s| s["signal"] == "api-vip").unwrap();
    assert!(
        vip["finding"]["evidence"][0]
            .as_str()
            .is_some_and(|e| e.starts_with("at ") && e.contains(" and ")),
        "{vip:#}"
    );
    crate::support::assert_trial(&o, "gate4::lab::chaos::split-brain::api-vip", "FAILED");
    // Restored all the same: the link is back.
    assert!(!bench.link_down(101));
    bench.lab.stop().await;
}
