//! A randomised fault campaign against the chaos step, as issue 28 asks of it: runs killed
//! with SIGKILL at random instants, each followed by `gates recover`, and runs whose Proxmox
//! API stalls when the restore starts the VMs. After every one: every VM of the lab runs, the
//! cluster's Lease is free, and every write any lab server received since the run began is
//! one its plan names (a power action on a VM of the chosen host, or the Lease), and every
//! stop or start the journal records as done is one the lab received (a run journals only what
//! it sent).
//!
//! Not in the test command: it takes about a quarter of an hour. Run it with
//! `cargo test --test integration chaos::campaign -- --ignored --nocapture`;
//! `GATES_CAMPAIGN_KILLS`, `GATES_CAMPAIGN_STALLS` and `GATES_CAMPAIGN_SEED` change the
//! number of kills (50), of stalled runs (10) and the seed (printed, so a failure replays).

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{Bench, finish};
use crate::support::{stderr, stdout};

/// A small deterministic generator (splitmix64): the seed alone replays a campaign.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `[0, d)`.
    fn within(&mut self, d: Duration) -> Duration {
        d.mul_f64((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

fn count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The last journal event, the phase a kill interrupted.
fn phase(bench: &Bench) -> String {
    std::fs::read_to_string(bench.journal())
        .unwrap_or_default()
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v["event"].as_str().map(str::to_string))
        .unwrap_or_else(|| "nothing journaled".into())
}

/// The writes the lab received from `mark` on that are not in the plan of a run on `host`.
fn writes_outside(bench: &Bench, mark: usize, host: &str) -> Vec<String> {
    let planned: Vec<u32> = bench.lab.shared.read(|w| {
        w.envs[0]
            .nodes
            .iter()
            .filter(|&&n| w.hosts[w.nodes[n].host].name == host)
            .map(|&n| w.nodes[n].vmid)
            .collect()
    });
    bench.lab.log.snapshot()[mark..]
        .iter()
        .filter(|r| !r.read_only)
        .filter(|r| {
            let lease = r.path.contains("/namespaces/kube-system/leases");
            let power = r
                .path
                .starts_with(&format!("/api2/json/nodes/{host}/qemu/"))
                && r.path.contains("/status/")
                && planned
                    .iter()
                    .any(|v| r.path.contains(&format!("/qemu/{v}/")));
            // Logins and ticket checks are reads that happen to be POSTs.
            let ticket = r.path == "/api2/json/access/ticket";
            !(lease || power || ticket)
        })
        .map(|r| format!("{:?} {} {} ({})", r.protocol, r.verb, r.path, r.status))
        .collect()
}

/// Journal lines from line `from` on that say a VM was stopped or started without the lab
/// having received that request since `mark`: a run journals only what it sent.
fn journaled_unsent(bench: &Bench, from: usize, mark: usize) -> Vec<String> {
    let sent: Vec<String> = bench.lab.log.snapshot()[mark..]
        .iter()
        .filter(|r| !r.read_only)
        .map(|r| r.path.clone())
        .collect();
    std::fs::read_to_string(bench.journal())
        .unwrap_or_default()
        .lines()
        .skip(from)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            let action = match v["event"].as_str()? {
                "stopped" => "stop",
                "started" => "start",
                _ => return None,
            };
            let vmid = v["vmid"].as_u64()?;
            let path = format!("/qemu/{vmid}/status/{action}");
            (!sent.iter().any(|p| p.ends_with(&path)))
                .then(|| format!("journaled {action} of VM {vmid}, never sent"))
        })
        .collect()
}

fn journal_lines(bench: &Bench) -> usize {
    std::fs::read_to_string(bench.journal())
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Whether someone holds the Lease `kube-system/gates-chaos` in the lab's environment.
fn lease_held(bench: &Bench) -> Option<String> {
    bench.lab.shared.read(|w| {
        let lease = w.envs[0].store.get(
            gates_lab::resources::Res::Leases,
            "kube-system",
            "gates-chaos",
        )?;
        lease["spec"]["holderIdentity"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(str::to_string)
    })
}

/// Wait until every VM runs and every node has booted, so a new run's preflight can pass.
async fn quiet(bench: &Bench) {
    let until = Instant::now() + Duration::from_secs(120);
    while !bench
        .lab
        .shared
        .read(|w| w.nodes.iter().all(|n| n.vm_running && n.booted))
    {
        assert!(Instant::now() < until, "the lab did not settle in 120 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Start a run on `host` once the lab has settled.
async fn start_run(bench: &Bench, host: &str) -> std::process::Child {
    quiet(bench).await;
    bench
        .command(&bench.config(), &["chaos", "lab", "--host", host])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gates starts")
}

/// A whole run on `host`, started again while its preflight refuses (the lab's workloads
/// still settling after the previous run): the first run the preflight let through.
async fn whole_run(bench: &Bench, host: &str) -> std::process::Output {
    for _ in 0..30 {
        let child = start_run(bench, host).await;
        let out = finish(child, Duration::from_secs(180)).await;
        if out.status.code() == Some(2) && stderr(&out).contains("preflight refused") {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        return out;
    }
    panic!("the preflight refused 30 runs on {host} in a row");
}

#[derive(Default)]
struct Tally {
    runs: usize,
    by_phase: BTreeMap<String, usize>,
    exit_codes: BTreeMap<String, usize>,
    vms_off: usize,
    leases_held: usize,
    writes_outside: Vec<String>,
    recover_failed: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a campaign of a quarter of an hour: run with --ignored"]
async fn killed_and_stalled_chaos_runs_leave_every_vm_running_no_lease_held_and_nothing_touched_outside_the_plan()
 {
    let kills = count("GATES_CAMPAIGN_KILLS", 50);
    let stalls = count("GATES_CAMPAIGN_STALLS", 10);
    let seed = std::env::var("GATES_CAMPAIGN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("campaign: seed {seed}, {kills} kills, {stalls} stalled runs");
    let mut rng = Rng(seed);
    let bench = Bench::start("adr-007", 230).await;
    bench.proxmox_timeout("2s");
    let hosts: Vec<String> = bench.lab.shared.read(|w| {
        let mut h: Vec<String> = w.envs[0]
            .nodes
            .iter()
            .filter(|&&n| w.nodes[n].is_control_plane())
            .map(|&n| w.hosts[w.nodes[n].host].name.clone())
            .collect();
        h.sort();
        h.dedup();
        h
    });

    // One whole run first: the span the kills are spread over.
    let started = Instant::now();
    let out = whole_run(&bench, &hosts[0]).await;
    let span = started.elapsed();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "a whole run:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    eprintln!("campaign: a whole run takes {:.1} s", span.as_secs_f64());

    let mut kill = Tally::default();
    let wall = Instant::now();
    for i in 0..kills {
        let host = hosts[rng.below(hosts.len() as u64) as usize].clone();
        let at = rng.within(span);
        let mark = bench.lab.log.len();
        let lines = journal_lines(&bench);
        let mut child = start_run(&bench, &host).await;
        tokio::time::sleep(at).await;
        let phase = phase(&bench);
        let finished = child.try_wait().ok().flatten().is_some();
        let _ = child.kill(); // SIGKILL
        let out = finish(child, Duration::from_secs(30)).await;
        let phase = if finished {
            "finished before the kill".to_string()
        } else {
            phase
        };
        *kill.by_phase.entry(phase.clone()).or_default() += 1;
        *kill
            .exit_codes
            .entry(format!("{:?}", out.status.code()))
            .or_default() += 1;
        let recovered = bench.run(&bench.config(), &["recover", "lab"]).await;
        if recovered.status.code() != Some(0) {
            kill.recover_failed.push(format!(
                "kill {i} ({host}, {:.1} s): {}",
                at.as_secs_f64(),
                stderr(&recovered)
            ));
        }
        kill.runs += 1;
        if !bench.all_vms_running() {
            kill.vms_off += 1;
            eprintln!(
                "kill {i} ({host}, {:.2} s, after {phase}): a VM is off after recover:\n{}",
                at.as_secs_f64(),
                stdout(&recovered)
            );
        }
        if let Some(holder) = lease_held(&bench) {
            kill.leases_held += 1;
            eprintln!("kill {i}: the Lease is held by {holder} after recover");
        }
        kill.writes_outside.extend(
            writes_outside(&bench, mark, &host)
                .into_iter()
                .chain(journaled_unsent(&bench, lines, mark))
                .map(|w| format!("kill {i} ({host}): {w}")),
        );
    }
    let kill_wall = wall.elapsed();

    let mut stall = Tally::default();
    let mut retried = 0;
    let wall = Instant::now();
    for i in 0..stalls {
        let host = hosts[rng.below(hosts.len() as u64) as usize].clone();
        let stalled = Duration::from_secs(2) + rng.within(Duration::from_secs(10));
        let mark = bench.lab.log.len();
        let lines = journal_lines(&bench);
        bench.lab.proxmox.stall_at_next_start(stalled);
        let out = whole_run(&bench, &host).await;
        stall.runs += 1;
        *stall
            .exit_codes
            .entry(format!("{:?}", out.status.code()))
            .or_default() += 1;
        let journal = std::fs::read_to_string(bench.journal()).unwrap_or_default();
        if journal.contains("\"action\":\"start\"") {
            retried += 1;
        }
        if !bench.all_vms_running() {
            stall.vms_off += 1;
            eprintln!(
                "stall {i} ({host}, {:.1} s): a VM is off after the run:\n{}\n{}",
                stalled.as_secs_f64(),
                stdout(&out),
                stderr(&out)
            );
            let _ = bench.run(&bench.config(), &["recover", "lab"]).await;
        }
        if let Some(holder) = lease_held(&bench) {
            stall.leases_held += 1;
            eprintln!("stall {i}: the Lease is held by {holder} after the run");
        }
        stall.writes_outside.extend(
            writes_outside(&bench, mark, &host)
                .into_iter()
                .chain(journaled_unsent(&bench, lines, mark))
                .map(|w| format!("stall {i} ({host}): {w}")),
        );
        bench.lab.proxmox.stall_for(Duration::ZERO);
    }
    let stall_wall = wall.elapsed();

    eprintln!(
        "campaign: {} kills in {:.0} s, interrupted at {:?}, exit codes {:?}; {} VMs off, {} Leases held, {} writes outside the plans, {} recovers failed",
        kill.runs,
        kill_wall.as_secs_f64(),
        kill.by_phase,
        kill.exit_codes,
        kill.vms_off,
        kill.leases_held,
        kill.writes_outside.len(),
        kill.recover_failed.len()
    );
    eprintln!(
        "campaign: {} stalled runs in {:.0} s ({retried} retried a start), exit codes {:?}; {} VMs off, {} Leases held, {} writes outside the plans",
        stall.runs,
        stall_wall.as_secs_f64(),
        stall.exit_codes,
        stall.vms_off,
        stall.leases_held,
        stall.writes_outside.len()
    );
    let mut failures: Vec<String> = Vec::new();
    failures.extend(kill.recover_failed);
    failures.extend(kill.writes_outside);
    failures.extend(stall.writes_outside);
    assert!(
        kill.vms_off + kill.leases_held + stall.vms_off + stall.leases_held == 0
            && failures.is_empty(),
        "seed {seed}: {} VMs off, {} Leases held:\n{}",
        kill.vms_off + stall.vms_off,
        kill.leases_held + stall.leases_held,
        failures.join("\n")
    );
    bench.lab.stop().await;
}
