//! How quickly `gates watch` turns one changed pod into re-evaluated trials on a large
//! cluster, and whether its memory holds steady while pods churn. For each size the lab's
//! generator builds a cluster (N nodes, 20 pods per node) and serves it over the real
//! protocols; then:
//!
//! - **latency**: the watch engine runs in this process with no debounce; one pod's
//!   readiness is flipped in the lab 20 times, and each time the wait is measured from the
//!   change to the published evaluation that re-evaluated the trials reading pods (the lab's
//!   watch event, gates' decoding, the state update, the evaluation, the record);
//! - **memory**: `gates watch` runs as its own process while the lab deletes one pod and
//!   adds another every 100 ms, its resident set read from `/proc` every 10 s: the first
//!   steady value (the floor of the minute after one minute of churn), the floor of the
//!   last minute `GATES_BENCH_WATCH_SECONDS` (300; the README's figure is from 3600) later,
//!   and the largest sample in between.
//!
//! Run with `cargo bench --bench watch_scale`; `GATES_BENCH_SIZES` picks the sizes (5000).
//! Prints a table; nothing here asserts a time.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gates_lab::resources::Res;

/// The allocator `gates` itself uses (src/main.rs), so the watch engine measured in this
/// process allocates as the installed binary does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PODS_PER_NODE: usize = 20;
/// 127.224.x.y: no test uses it.
const SUBNET: u8 = 224;

fn main() {
    let sizes: Vec<usize> = std::env::var("GATES_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![5000]);
    let seconds: u64 = std::env::var("GATES_BENCH_WATCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "| cluster | ready after | change → re-evaluated: median | p90 | max | RSS floor, first minute | floor after {seconds} s of churn | largest | growth |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for nodes in sizes {
        match runtime.block_on(one_size(nodes, seconds)) {
            Ok(row) => println!("{row}"),
            Err(err) => println!("| {nodes} nodes | not measured: {err} | | | | | | | |"),
        }
    }
}

async fn one_size(nodes: usize, seconds: u64) -> Result<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let env_dir = dir.path().join("environments");
    let lab = gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: "adr-007".into(),
        generate_nodes: Some(nodes),
        pods_per_node: Some(PODS_PER_NODE),
        subnet: SUBNET,
        subnet_choice: Default::default(),
        speed: 1.0,
        state_dir: dir.path().join("lab"),
        env_dir: Some(env_dir.clone()),
    })
    .await
    .map_err(|e| format!("the lab did not start: {e}"))?;
    let (ready, latencies) = latency(&root, &env_dir, &dir.path().join("reports"), &lab).await?;
    let memory = memory(&root, &env_dir, &lab, seconds).await?;
    lab.stop().await;
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    let mib = |kib: u64| format!("{} MiB", kib / 1024);
    let (steady, last, largest) = memory;
    Ok(format!(
        "| {nodes} nodes, {} pods | {:.1} s | {} | {} | {} | {} | {} | {} | {:+.1} % |",
        nodes * PODS_PER_NODE,
        ready.as_secs_f64(),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(*latencies.last().unwrap()),
        mib(steady),
        mib(last),
        mib(largest),
        (last as f64 / steady as f64 - 1.0) * 100.0
    ))
}

/// The first pod of the lab's environment, to change.
fn some_pod(lab: &gates_lab::Lab) -> Result<serde_json::Value, String> {
    lab.shared.read(|w| {
        let env = w
            .envs
            .iter()
            .find(|e| e.spec.name == "lab")
            .ok_or("no env lab")?;
        env.store
            .list(Res::Pods)
            .into_iter()
            .next()
            .map(|(_, o)| (*o).clone())
            .ok_or_else(|| "no pod".to_string())
    })
}

/// Set the pod's `Ready` condition (adding one when it has none).
fn set_ready(pod: &mut serde_json::Value, status: &str) {
    let conditions = &mut pod["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = serde_json::json!([]);
    }
    let list = conditions.as_array_mut().expect("an array");
    match list.iter_mut().find(|c| c["type"] == "Ready") {
        Some(ready) => ready["status"] = serde_json::json!(status),
        None => list.push(serde_json::json!({"type": "Ready", "status": status})),
    }
}

fn put_pod(lab: &gates_lab::Lab, pod: serde_json::Value) {
    lab.shared.change(|w, _| {
        if let Some(env) = w.envs.iter_mut().find(|e| e.spec.name == "lab") {
            env.store.put(Res::Pods, pod);
        }
    });
}

async fn latency(
    root: &Path,
    env_dir: &Path,
    reports: &Path,
    lab: &gates_lab::Lab,
) -> Result<(Duration, Vec<Duration>), String> {
    let config = gates_engine::config::Config::load(&root.join("gates"), &[env_dir.to_path_buf()])
        .map_err(|e| e.to_string())?;
    let (publish, mut newest) = tokio::sync::watch::channel(None);
    let started = Instant::now();
    let engine = tokio::spawn(gates_engine::watch::run(
        config,
        root.to_path_buf(),
        gates_engine::watch::WatchOptions {
            env: "lab".into(),
            reports: reports.to_path_buf(),
            interval: Duration::from_secs(3600),
            stale_after: Duration::from_secs(3600),
            debounce: Duration::ZERO,
        },
        publish,
    ));
    let newest_of = |rx: &tokio::sync::watch::Receiver<
        Option<Arc<gates_engine::watch::Published>>,
    >| { rx.borrow().clone() };
    loop {
        tokio::time::timeout(Duration::from_secs(900), newest.changed())
            .await
            .map_err(|_| "not ready within 15 minutes".to_string())?
            .map_err(|e| e.to_string())?;
        if newest_of(&newest).is_some_and(|p| p.ready) {
            break;
        }
    }
    let ready = started.elapsed();
    // Let the first evaluations settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut pod = some_pod(lab)?;
    let mut latencies = Vec::new();
    let mut evaluations = Vec::new();
    // How many other evaluations were published between a change and its own.
    let mut between = Vec::new();
    for round in 0..20 {
        let before = newest_of(&newest).map_or(0, |p| p.evaluation);
        // The pod turns not ready, then ready again: a change every trial reading pods sees.
        let ready = if round % 2 == 0 { "False" } else { "True" };
        set_ready(&mut pod, ready);
        let changed = Instant::now();
        put_pod(lab, pod.clone());
        loop {
            tokio::time::timeout(Duration::from_secs(60), newest.changed())
                .await
                .map_err(|_| format!("round {round}: no evaluation within a minute"))?
                .map_err(|e| e.to_string())?;
            let published = newest_of(&newest).ok_or("nothing published")?;
            // Evaluated since the change, though the channel may have shown only a newer
            // evaluation (one of the host-loss prediction alone) than the one that did it.
            if published
                .evaluated_in
                .iter()
                .any(|(t, at)| t.contains("replicated-controller") && *at > before)
            {
                latencies.push(changed.elapsed());
                between.push(published.evaluation - before - 1);
                evaluations.push(published.record.collect_time);
                if round == 19 {
                    let mut slow: Vec<(u128, &str)> = published
                        .record
                        .trials
                        .iter()
                        .filter(|t| {
                            published
                                .evaluated_in
                                .get(&t.name)
                                .is_some_and(|e| *e > before)
                        })
                        .map(|t| (t.duration.as_micros(), t.name.as_str()))
                        .collect();
                    slow.sort();
                    eprintln!("trials re-evaluated (µs): {slow:?}");
                }
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    engine.abort();
    // In the order of the rounds, so a slow round can be matched with what ran then.
    eprintln!(
        "change → re-evaluated per round (ms): {:?}",
        latencies
            .iter()
            .map(Duration::as_millis)
            .collect::<Vec<_>>()
    );
    eprintln!("evaluations published in between per round: {between:?}");
    latencies.sort();
    evaluations.sort();
    eprintln!("evaluation (apply + evaluate) per change: {evaluations:?}");
    Ok((ready, latencies))
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

async fn memory(
    root: &Path,
    env_dir: &Path,
    lab: &gates_lab::Lab,
    seconds: u64,
) -> Result<(u64, u64, u64), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gates"))
        .arg("--config")
        .arg(root.join("gates"))
        .arg("--env-dir")
        .arg(env_dir)
        .args([
            "watch",
            "lab",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "1m",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let pid = child.id();
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains(" ready: ") {
                let _ = tx.send(());
            }
        }
    });
    tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(900)))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|_| "gates watch not ready within 15 minutes".to_string())?;
    // The steady value is taken under churn, once it has run for a minute: while pods churn,
    // each evaluation holds the state and the record it is building at once, so a value taken
    // before the churn measures an idle watch, not the working set whose growth matters. The
    // resident set is a sawtooth: about a quarter higher while a host-loss prediction holds
    // its copy of the state and its model, so one sample says which phase it fell in, not
    // whether memory grew. The steady value and the value at the end are each the floor of a
    // minute of samples (the lowest: between two predictions), where a leak would show; the
    // largest sample is the sawtooth's top.
    let settle = Instant::now() + Duration::from_secs(60);
    let mut settled: Vec<(Instant, u64)> = Vec::new();
    let mut samples: Vec<u64> = Vec::new();
    let template = some_pod(lab)?;
    let end = settle + Duration::from_secs(seconds);
    let mut next_sample = Instant::now() + Duration::from_secs(10);
    let mut n = 0u64;
    let mut previous: Option<String> = None;
    while Instant::now() < end {
        // One pod goes, another comes (a rollout's churn).
        n += 1;
        let name = format!("churn-{n}");
        let mut pod = template.clone();
        pod["metadata"]["name"] = serde_json::json!(name);
        pod["metadata"]["uid"] = serde_json::json!(format!("churn-uid-{n}"));
        let namespace = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let gone = previous.replace(name);
        lab.shared.change(|w, _| {
            if let Some(env) = w.envs.iter_mut().find(|e| e.spec.name == "lab") {
                if let Some(gone) = gone {
                    env.store.delete(Res::Pods, &namespace, &gone);
                }
                env.store.put(Res::Pods, pod);
            }
        });
        if Instant::now() >= next_sample {
            let rss = rss_kib(pid).ok_or("gates watch exited during the churn")?;
            if Instant::now() >= settle {
                settled.push((Instant::now(), rss));
            }
            samples.push(rss / 1024);
            next_sample += Duration::from_secs(10);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    settled.push((
        Instant::now(),
        rss_kib(pid).ok_or("gates watch exited during the churn")?,
    ));
    let minute = Duration::from_secs(60);
    let floor_of = |keep: &dyn Fn(Instant) -> bool| {
        settled
            .iter()
            .filter(|(at, _)| keep(*at))
            .map(|(_, rss)| *rss)
            .min()
            .unwrap_or(0)
    };
    let steady = floor_of(&|at| at < settle + minute);
    let last = floor_of(&|at| at + minute >= Instant::now());
    let largest = settled.iter().map(|(_, rss)| *rss).max().unwrap_or(last);
    eprintln!("RSS every 10 s (MiB): {samples:?}");
    let _ = child.kill();
    let _ = child.wait();
    Ok((steady, last, largest))
}
