//! How long `gates check` takes, and how much memory it needs, on a large cluster, beside
//! what the same reads cost other clients. For each size the lab's generator builds a
//! cluster (N nodes, 20 pods per node) and serves it over the real protocols; then, in one
//! run, side by side:
//!
//! - `gates check ENV --snapshot FILE` on a snapshot `gates snapshot` wrote of it (offline),
//! - `gates check ENV` against the lab (live: Kubernetes, Talos, Proxmox),
//! - the kubectl commands the README gives for a snapshot, one after the other,
//! - one round of the same LISTs, unpaged and all at once, with curl over HTTP/2: about the
//!   least any client can spend reading them.
//!
//! Times are wall clock, the best of a few runs; memory is the peak resident set of the
//! `gates` process (`/usr/bin/time`). Run with `cargo bench --bench check_scale`
//! (`just bench`); `GATES_BENCH_SIZES=1000,3000,5000,10000` picks the sizes (10,000 is left
//! out by default: it needs several GiB for the lab alone), `GATES_BENCH_RUNS` the runs
//! per figure (2). Prints a table; nothing here asserts a time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const PODS_PER_NODE: usize = 20;
/// 127.223.x.y: no test uses it, so the benchmark runs beside the test suite.
const SUBNET: u8 = 223;

fn main() {
    let sizes: Vec<usize> = std::env::var("GATES_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1000, 3000, 5000]);
    let runs: usize = std::env::var("GATES_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2)
        .max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "gates check at scale ({PODS_PER_NODE} pods per node; best of {runs}; memory: peak RSS of gates)"
    );
    println!(
        "| size | offline `check --snapshot` | live `check` | kubectl script | one curl round | live ÷ curl | kubectl ÷ live |"
    );
    println!("|---|---|---|---|---|---|---|");
    for nodes in sizes {
        match runtime.block_on(one_size(nodes, runs)) {
            Ok(row) => println!("{row}"),
            Err(err) => println!("| {nodes} nodes | not measured: {err} | | | | | |"),
        }
    }
}

async fn one_size(nodes: usize, runs: usize) -> Result<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
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
    let result = tokio::task::spawn_blocking({
        let root = root.to_path_buf();
        let dir = dir.path().to_path_buf();
        move || measure_all(&root, &dir, &env_dir, nodes, runs)
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r);
    lab.stop().await;
    result
}

fn measure_all(
    root: &Path,
    dir: &Path,
    env_dir: &Path,
    nodes: usize,
    runs: usize,
) -> Result<String, String> {
    let env_file = std::fs::read_dir(env_dir)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "yaml"))
        .ok_or("the lab wrote no environment file")?;
    let env = env_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .ok_or("an environment file without a name")?;
    let gates = env!("CARGO_BIN_EXE_gates");
    let base = |args: &[&str]| {
        let mut all: Vec<String> = vec![
            "--config".into(),
            root.join("gates").display().to_string(),
            "--env-dir".into(),
            env_dir.display().to_string(),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        all
    };
    let snapshot = dir.join("snapshot.json");
    let reports = dir.join("reports");
    let written = Command::new(gates)
        .args(base(&[
            "snapshot",
            &env,
            "-o",
            &snapshot.display().to_string(),
            "--allow-incomplete",
        ]))
        .output()
        .map_err(|e| e.to_string())?;
    if !written.status.success() {
        return Err(format!(
            "gates snapshot failed: {}",
            String::from_utf8_lossy(&written.stderr).trim()
        ));
    }
    let reports_arg = reports.display().to_string();
    let offline = best_of(runs, || {
        timed(
            gates,
            &base(&[
                "check",
                &env,
                "--snapshot",
                &snapshot.display().to_string(),
                "--reports",
                &reports_arg,
                "--format",
                "terse",
            ]),
        )
    })?;
    let live = best_of(runs, || {
        timed(
            gates,
            &base(&[
                "check",
                &env,
                "--reports",
                &reports_arg,
                "--format",
                "terse",
            ]),
        )
    })?;
    let access = Access::of(dir, &env)?;
    let kubectl = match which("kubectl") {
        Some(kubectl) => Some(kubectl_script(&kubectl, &access)?),
        None => None,
    };
    let curl = match which("curl") {
        Some(curl) => Some(best_of(runs, || curl_round(&curl, &access))?),
        None => None,
    };
    let size_mib = std::fs::metadata(&snapshot).map_or(0, |m| m.len()) / (1024 * 1024);
    let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let ratio = |a: Duration, b: Duration| format!("{:.1}×", a.as_secs_f64() / b.as_secs_f64());
    Ok(format!(
        "| {nodes} nodes / {}k pods ({size_mib} MiB) | {}, {} MiB | {}, {} MiB | {} | {} | {} | {} |",
        nodes * PODS_PER_NODE / 1000,
        secs(offline.wall),
        offline.rss_kib / 1024,
        secs(live.wall),
        live.rss_kib / 1024,
        kubectl.map_or("no kubectl".into(), |k| secs(k.wall)),
        curl.map_or("no curl".into(), |c| secs(c.wall)),
        curl.map_or("-".into(), |c| ratio(live.wall, c.wall)),
        kubectl.map_or("-".into(), |k| ratio(k.wall, live.wall)),
    ))
}

#[derive(Clone, Copy)]
struct Measured {
    wall: Duration,
    rss_kib: u64,
}

fn best_of(
    runs: usize,
    mut run: impl FnMut() -> Result<Measured, String>,
) -> Result<Measured, String> {
    let mut best: Option<Measured> = None;
    for _ in 0..runs {
        let m = run()?;
        if best.is_none_or(|b| m.wall < b.wall) {
            best = Some(m);
        }
    }
    best.ok_or_else(|| "no run".into())
}

/// Run `program` under `/usr/bin/time` for its wall time and peak RSS. `gates check` exits 1
/// when a trial fails, which the lab's scenario has; only a missing summary line is an error.
fn timed(program: &str, args: &[String]) -> Result<Measured, String> {
    let out = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let output = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%e %M")
        .arg("-o")
        .arg(out.path())
        .arg(program)
        .args(args)
        .output()
        .map_err(|e| format!("/usr/bin/time: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !stdout.contains(" passed") {
        return Err(format!(
            "{program} {} printed no summary: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let text = std::fs::read_to_string(out.path()).map_err(|e| e.to_string())?;
    // GNU time puts "Command exited with non-zero status 1" on a line of its own before the
    // format's line when the program fails, as `gates check` does on a failed trial.
    let mut fields = text
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .split_whitespace();
    let wall: f64 = fields
        .next()
        .and_then(|f| f.parse().ok())
        .ok_or("no time")?;
    let rss_kib: u64 = fields.next().and_then(|f| f.parse().ok()).ok_or("no RSS")?;
    Ok(Measured {
        wall: Duration::from_secs_f64(wall),
        rss_kib,
    })
}

/// What a client needs to read the lab's Kubernetes API: server, CA and a token.
struct Access {
    kubeconfig: PathBuf,
    context: String,
    server: String,
    ca: PathBuf,
    /// A file with the `Authorization` header, so the token is not on a command line.
    header: PathBuf,
}

impl Access {
    fn of(dir: &Path, env: &str) -> Result<Access, String> {
        let kubeconfig = dir.join("lab").join("kubeconfig");
        let text = std::fs::read_to_string(&kubeconfig)
            .map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
        let config: serde_json::Value =
            serde_saphyr::from_str(&text).map_err(|e| format!("kubeconfig: {e}"))?;
        let env_text =
            std::fs::read_to_string(dir.join("environments").join(format!("{env}.yaml")))
                .map_err(|e| e.to_string())?;
        let context = env_text
            .lines()
            .find_map(|l| l.trim().strip_prefix("context: "))
            .ok_or("no kube context in the environment file")?
            .trim()
            .to_string();
        let named = |list: &str, name: &str| {
            config[list]
                .as_array()
                .and_then(|items| items.iter().find(|i| i["name"] == name))
                .cloned()
                .unwrap_or_default()
        };
        let ctx = named("contexts", &context);
        let cluster = named("clusters", ctx["context"]["cluster"].as_str().unwrap_or(""));
        let user = named("users", ctx["context"]["user"].as_str().unwrap_or(""));
        let server = cluster["cluster"]["server"]
            .as_str()
            .ok_or("no server in the kubeconfig")?
            .to_string();
        use base64::Engine;
        let ca_pem = base64::engine::general_purpose::STANDARD
            .decode(
                cluster["cluster"]["certificate-authority-data"]
                    .as_str()
                    .unwrap_or(""),
            )
            .map_err(|e| e.to_string())?;
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_pem).map_err(|e| e.to_string())?;
        let header = dir.join("authorization");
        std::fs::write(
            &header,
            format!(
                "Authorization: Bearer {}\n",
                user["user"]["token"].as_str().unwrap_or("")
            ),
        )
        .map_err(|e| e.to_string())?;
        Ok(Access {
            kubeconfig,
            context,
            server,
            ca,
            header,
        })
    }
}

/// The paths of every list gates reads (gates' own registry of kinds).
fn list_paths() -> Vec<String> {
    gates::collect::kinds::Kind::ALL
        .iter()
        .map(|k| {
            let c = k.coordinates();
            if c.group.is_empty() {
                format!("/api/{}/{}", c.version, c.plural)
            } else {
                format!("/apis/{}/{}/{}", c.group, c.version, c.plural)
            }
        })
        .collect()
}

/// The README's kubectl commands for a snapshot, one after the other.
fn kubectl_script(kubectl: &Path, access: &Access) -> Result<Measured, String> {
    let started = Instant::now();
    // Each command with whether the script may go on when it fails: the generator's clusters
    // run no Longhorn, so kubectl refuses `nodes.longhorn.io`, and an operator's script goes
    // on (gates reads the same 404s).
    let commands: [(&[&str], bool); 4] = [
        (
            &[
                "get",
                "nodes,pods,deployments,daemonsets,statefulsets,pdb,services,leases",
                "-A",
                "-o",
                "json",
            ],
            false,
        ),
        (
            &[
                "get",
                "ciliuml2announcementpolicies,nodes.longhorn.io,volumes.longhorn.io,replicas.longhorn.io,settings.longhorn.io",
                "-A",
                "-o",
                "json",
            ],
            true,
        ),
        (
            &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"],
            false,
        ),
        (
            &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/pods"],
            false,
        ),
    ];
    for (args, may_fail) in commands {
        let status = Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&access.kubeconfig)
            .arg("--context")
            .arg(&access.context)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        if !status.success() && !may_fail {
            return Err(format!("kubectl {} failed", args.join(" ")));
        }
    }
    Ok(Measured {
        wall: started.elapsed(),
        rss_kib: 0,
    })
}

/// Every list at once, unpaged, over one HTTP/2 connection.
fn curl_round(curl: &Path, access: &Access) -> Result<Measured, String> {
    let started = Instant::now();
    let mut command = Command::new(curl);
    command
        .args(["--silent", "--parallel", "--parallel-max", "32"])
        .args(["--http2", "--cacert"])
        .arg(&access.ca)
        .arg("-H")
        .arg(format!("@{}", access.header.display()))
        .args(["--write-out", "%{http_code}\\n"]);
    for path in list_paths() {
        command
            .arg("-o")
            .arg("/dev/null")
            .arg(format!("{}{path}", access.server));
    }
    let output = command.output().map_err(|e| e.to_string())?;
    // 404 is a kind the lab does not serve, as gates would find it.
    let codes = String::from_utf8_lossy(&output.stdout);
    if let Some(bad) = codes.lines().find(|c| *c != "200" && *c != "404") {
        return Err(format!("curl got HTTP {bad}"));
    }
    Ok(Measured {
        wall: started.elapsed(),
        rss_kib: 0,
    })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}
