//! The files a running lab writes for its clients: a kubeconfig, and one environment file
//! per environment in the harness's format (notes/lab-plan.md).

use crate::addr::{INGRESS_HTTP_PORT, KUBE_PORT, PROXMOX_PORT, Plan};
use crate::world::{Env, World};
use base64::Engine;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Write a file readable only by its owner (it may hold secrets).
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::rename(&tmp, path)
}

/// YAML-quote a string (double quotes, escaped).
fn yq(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// One environment's Kubernetes CA and tokens.
pub struct KubeCredentials<'a> {
    pub ca_pem: &'a str,
    pub admin: &'a str,
    pub read_only: &'a str,
}

/// One kubeconfig with a cluster, an admin user and a read-only user per environment; each
/// environment's context uses only that environment's CA and tokens.
pub fn kubeconfig(world: &World, plan: Plan, credentials: &[KubeCredentials<'_>]) -> String {
    let mut out = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (k, e) in world.envs.iter().enumerate() {
        let ca = credentials
            .get(k)
            .map(|c| base64::engine::general_purpose::STANDARD.encode(c.ca_pem))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "- name: {}\n  cluster:\n    server: https://{}:{KUBE_PORT}\n    certificate-authority-data: {ca}",
            e.name(),
            plan.vip_ip(k)
        );
    }
    out.push_str("users:\n");
    for (k, e) in world.envs.iter().enumerate() {
        let Some(c) = credentials.get(k) else {
            continue;
        };
        let _ = writeln!(
            out,
            "- name: {0}-admin\n  user:\n    token: {1}\n- name: {0}-readonly\n  user:\n    token: {2}",
            e.name(),
            c.admin,
            c.read_only
        );
    }
    out.push_str("contexts:\n");
    for e in &world.envs {
        let _ = writeln!(
            out,
            "- name: {0}\n  context:\n    cluster: {0}\n    user: {0}-admin",
            e.name()
        );
        let _ = writeln!(
            out,
            "- name: {0}-readonly\n  context:\n    cluster: {0}\n    user: {0}-readonly",
            e.name()
        );
    }
    let _ = writeln!(
        out,
        "current-context: {}",
        world.envs.first().map(|e| e.name()).unwrap_or("lab")
    );
    out
}

/// First words of every environment file the lab writes; the lab only ever removes files
/// that start with it.
pub const ENV_FILE_MARKER: &str = "# Written by gates-lab";

pub struct EnvFilePaths {
    pub kubeconfig: PathBuf,
    pub talosconfig: PathBuf,
    pub proxmox_token: PathBuf,
    pub proxmox_ca: PathBuf,
}

/// The environment file for environment `k`, in gates/environments format.
pub fn env_file(
    world: &World,
    plan: Plan,
    k: usize,
    paths: &EnvFilePaths,
    token_id: &str,
) -> String {
    let e = &world.envs[k];
    let like = e.spec.like.as_str();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{ENV_FILE_MARKER} for scenario {}; regenerated on every lab start.",
        world.scenario
    );
    let _ = writeln!(
        out,
        "description: Lab {like} (scenario {}), simulated by gates-lab.",
        world.scenario
    );
    let _ = writeln!(out, "like: {like}");
    let _ = writeln!(
        out,
        "kube:\n  context: {}\n  kubeconfig: {}",
        e.name(),
        yq(&paths.kubeconfig.display().to_string())
    );
    let _ = writeln!(
        out,
        "nodes:\n  control_planes: 3\n  host_label: topology.kubernetes.io/zone"
    );
    write_ingress(&mut out, e, plan, k);
    let _ = writeln!(out, "capacity:\n  margin: 0.3334\n  basis: usage");
    let _ = writeln!(
        out,
        "api:\n  endpoint: https://{}:{KUBE_PORT}",
        plan.vip_ip(k)
    );
    let endpoints: Vec<String> = e
        .nodes
        .iter()
        .filter(|&&n| world.nodes[n].is_control_plane() && world.nodes[n].addressed)
        .map(|&n| plan.node_ip(n).to_string())
        .collect();
    let _ = writeln!(
        out,
        "talos:\n  context: {}\n  talosconfig: {}\n  endpoints: [{}]",
        e.name(),
        yq(&paths.talosconfig.display().to_string()),
        endpoints.join(", ")
    );
    write_proxmox(&mut out, world, plan, e, paths, token_id);
    out.push_str(&chaos_section(world.clock.speed()));
    out
}

/// The ingress section: the Traefik Service and, with an ingress, each host's URL.
fn write_ingress(out: &mut String, e: &Env, plan: Plan, k: usize) {
    if let Some(ing) = &e.spec.ingress {
        let _ = writeln!(
            out,
            "ingress:\n  services:\n    - selector: {{ app.kubernetes.io/name: traefik }}"
        );
        let _ = writeln!(out, "  urls:");
        for h in &ing.hosts {
            let _ = writeln!(
                out,
                "    - url: http://{}:{INGRESS_HTTP_PORT}/\n      host: {h}\n      expect_status: 200",
                plan.ingress_ip(k)
            );
        }
    } else {
        let _ = writeln!(
            out,
            "ingress:\n  services:\n    - selector: {{ app.kubernetes.io/name: traefik }}"
        );
    }
}

/// The Proxmox section: the first host's API with the others as fallbacks, the token, the
/// VMs' tag, and the switch and power feed the scenario declares for each host.
fn write_proxmox(
    out: &mut String,
    world: &World,
    plan: Plan,
    e: &Env,
    paths: &EnvFilePaths,
    token_id: &str,
) {
    // Every other host's API too, so `--whole-host` can wake the host behind `url`.
    let fallback: Vec<String> = (1..world.hosts.len())
        .map(|i| format!("https://{}:{PROXMOX_PORT}", plan.host_ip(i)))
        .collect();
    let _ = writeln!(
        out,
        "proxmox:\n  url: https://{}:{PROXMOX_PORT}\n  fallback_urls: [{}]\n  token_id: {}\n  token_secret_file: {}\n  ca_file: {}\n  vms:\n    tags: [{}]",
        plan.host_ip(0),
        fallback.join(", "),
        yq(token_id),
        yq(&paths.proxmox_token.display().to_string()),
        yq(&paths.proxmox_ca.display().to_string()),
        e.tag
    );
    // What the scenario says each host hangs on, as an operator declares it.
    let declared: Vec<String> = world
        .hosts
        .iter()
        .filter(|h| h.switch.is_some() || h.power.is_some())
        .map(|h| {
            let mut parts = Vec::new();
            if let Some(s) = &h.switch {
                parts.push(format!("switch: {}", yq(s)));
            }
            if let Some(p) = &h.power {
                parts.push(format!("power: {}", yq(p)));
            }
            format!("    {}: {{{}}}", yq(&h.name), parts.join(", "))
        })
        .collect();
    if !declared.is_empty() {
        let _ = writeln!(out, "  hosts:\n{}", declared.join("\n"));
    }
}

/// Chaos settings (gate 4) for a lab running `speed` times faster than real time: the
/// harness's defaults in simulated time, converted to real time, with one or two sample
/// intervals of slack on the budgets so sampling granularity cannot fail them. The workloads
/// keep the harness's default budget (none): they are read through the API, and the time
/// they cannot be seen while the API's own probes measure it down is the API's, judged
/// against the API budget, so a run on the VIP's host passes without widening it.
fn chaos_section(speed: f64) -> String {
    let speed = if speed.is_finite() && speed > 0.0 {
        speed
    } else {
        1.0
    };
    let real_ms = |sim_secs: f64| ((sim_secs * 1000.0) / speed).round().max(1.0) as u64;
    let interval = real_ms(0.5).clamp(100, 500);
    // Host down for six simulated minutes: past the 5m50s pod eviction of a dead node.
    let outage = real_ms(360.0).max(2000);
    let recovery = real_ms(900.0).max(15_000);
    let slack = 2 * interval;
    format!(
        "chaos:\n  allowed: true\n  sample_interval: {interval}ms\n  outage: {outage}ms\n  recovery_timeout: {recovery}ms\n  budgets:\n    api: {{ longest: {}ms, total: {}ms }}\n    ingress: {{ longest: {}ms, total: {}ms }}\n",
        real_ms(75.0) + slack,
        real_ms(90.0) + slack,
        real_ms(25.0) + slack,
        real_ms(40.0) + slack,
    )
}
