//! The plan phase: read the cluster, judge gates 1 to 3 and the steady state (preflight),
//! choose the host and its VMs, build the probes, and say all of it before anything is
//! touched.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use gates_infra::proxmox::ProxmoxClient;

use super::timings::Timings;
use super::{Target, host_power, preflight};
use crate::chaos::ChaosOptions;
use crate::chaos::clients::Clients;
use crate::chaos::journal::FaultKind;
use crate::chaos::probes::{self, LeaderLog, Probe, ProbeInputs};
use crate::chaos::{ChaosError, report};
use crate::cluster;
use crate::collect;
use crate::config::{ChaosSpec, Config, Environment, ProxmoxAccess};
use crate::runner;
use crate::state::State;

/// The cluster as read before the run, and every reason not to go ahead.
pub struct Preflight {
    pub state: State,
    pub refusals: Vec<String>,
}

pub async fn preflight(config: &Config, env: &Environment, clients: &Clients) -> Preflight {
    let state = collect::live_with(config, env, &clients.kube).await;
    let specs = runner::trials(config, env);
    // The gates whose files declare `chaos-preflight`. The host-loss check judges every host;
    // the run holds only its target to the prediction, so `--expect-failure` can measure a
    // predicted failure. Failure domains beyond a host (a shared switch) do not make one
    // host's power loss less safe, so they do not hold the run back either.
    let preflight_gates: Vec<u32> = config
        .gates
        .iter()
        .filter(|g| g.has(crate::config::GateRole::ChaosPreflight))
        .map(|g| g.number)
        .collect();
    let gated: Vec<&runner::TrialSpec> = specs
        .iter()
        .filter(|s| {
            preflight_gates.contains(&s.gate)
                && !matches!(s.check.kind(), "host-loss" | "failure-domains")
        })
        .collect();
    let gate_results = runner::evaluate(&gated, env, &state);
    let controllers = cluster::protected_controllers(&config.gates);
    let refusals = preflight::refusals(&state, &gate_results, &controllers);
    Preflight { state, refusals }
}

/// Refused with every preflight reason and `why`, if any.
pub fn refused(env: &Environment, refusals: &[String], why: Option<String>) -> ChaosError {
    let mut reasons = refusals.to_vec();
    reasons.extend(why);
    ChaosError::PreflightRefused {
        env: env.name.clone(),
        reasons,
    }
}

/// The host, its VMs and (whole-host mode) the client that wakes it again.
pub struct Planned {
    pub target: Target,
    pub wake_client: Option<ProxmoxClient>,
    pub timings: Timings,
}

pub async fn plan(
    env: &Environment,
    access: &ProxmoxAccess,
    spec: &ChaosSpec,
    args: &ChaosOptions,
    pre: &Preflight,
    today: chrono::NaiveDate,
) -> Result<Planned, ChaosError> {
    // Without a target there is no plan to print; say every reason at once.
    let Some(proxmox) = pre.state.proxmox.present() else {
        return Err(refused(env, &pre.refusals, None));
    };
    let refuse = |why: super::Refusal| refused(env, &pre.refusals, Some(why.0));
    let (host, reason) =
        super::choose_host(&args.host, &pre.state, proxmox, today).map_err(refuse)?;
    let mut target = super::target(env, proxmox, &host, reason, args.whole_host).map_err(refuse)?;
    target.fault = args.fault;
    if args.fault == FaultKind::Partition {
        if target.whole_host {
            return Err(refuse(
                "--whole-host shuts the host down, a partition keeps it running: give one or the other".into(),
            ));
        }
        let client =
            collect::proxmox::client(env, access).map_err(|err| refuse(err.to_string().into()))?;
        super::partition::read_devices(&client, &mut target)
            .await
            .map_err(refuse)?;
    }
    // Whole-host mode acts through another host's API: the one that can wake this host.
    let wake_client = if target.whole_host {
        let (client, how) = host_power::prepare(env, access, &host)
            .await
            .map_err(refuse)?;
        target.host_power = Some(how);
        Some(client)
    } else {
        None
    };
    let timings = Timings::of(spec, target.whole_host);
    Ok(Planned {
        target,
        wake_client,
        timings,
    })
}

/// The probes of the run, sampling through `clients`.
pub fn probes(
    config: &Config,
    env: &Environment,
    pre: &Preflight,
    planned: &Planned,
    clients: &Clients,
    leaders: &LeaderLog,
) -> Result<Vec<Probe>, ChaosError> {
    let stopped_nodes: Vec<String> = planned.target.vms.iter().map(|v| v.node.clone()).collect();
    let (surviving, members) = pre
        .state
        .talos
        .present()
        .map(|t| probes::surviving_endpoints(t, &stopped_nodes))
        .unwrap_or_default();
    probes::build(ProbeInputs {
        env,
        access: &clients.access,
        kube: clients.kube.as_ref().ok().cloned(),
        controllers: cluster::protected_controllers(&config.gates),
        talos: clients.talos.clone(),
        surviving_talos: surviving,
        etcd_members: members,
        interval: planned.timings.interval,
        timeout: planned.timings.timeout,
        leaders: leaders.clone(),
    })
    .map_err(|reason| ChaosError::Setup {
        env: env.name.clone(),
        what: "probes",
        reason: reason.to_string(),
    })
}

/// The plan, as printed before anything is touched.
pub fn plan_text(
    env: &Environment,
    spec: &ChaosSpec,
    target: &Target,
    probes: &[Probe],
    restore_by: DateTime<Utc>,
    refusals: &[String],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Chaos plan for {} (gate 4)", env.name);
    let _ = writeln!(out, "  host: {} ({})", target.host, target.reason);
    match &target.host_power {
        Some(how) => {
            let _ = writeln!(
                out,
                "  mode: whole host: its VMs are hard-stopped, then {} is shut down",
                target.host
            );
            let _ = writeln!(
                out,
                "  wake: wake-on-LAN {} sent by {} ({}), then the VMs are started",
                how.mac, how.wake_via_host, how.wake_via_url
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  mode: hard stop of this environment's VMs on the host"
            );
        }
    }
    let _ = writeln!(out, "  VMs to stop:");
    for vm in &target.vms {
        let _ = writeln!(out, "    - vmid {} {} (node {})", vm.vmid, vm.name, vm.node);
    }
    if !target.bystanders.is_empty() {
        let _ = writeln!(out, "  left running on {}:", target.host);
        for b in &target.bystanders {
            let _ = writeln!(out, "    - {}", super::describe_bystander(b));
        }
    }
    let _ = writeln!(out, "  probes (every {}):", spec.sample_interval);
    for probe in probes {
        let _ = writeln!(
            out,
            "    - {}: {}; budget longest {}, total {}",
            probe.name, probe.what, probe.budget.longest, probe.budget.total
        );
    }
    let _ = writeln!(
        out,
        "  outage: at most {}, then restore; recovery within {}",
        spec.outage, spec.recovery_timeout
    );
    let _ = writeln!(
        out,
        "  deadline: every VM running again by {}",
        report::timestamp(restore_by)
    );
    if refusals.is_empty() {
        let _ = writeln!(
            out,
            "  preflight: gates 1-3 pass, steady state, no host down"
        );
    } else {
        let _ = writeln!(out, "  preflight: REFUSED");
        for r in refusals {
            let _ = writeln!(out, "    - {r}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::act::test_power::target;
    use crate::chaos::test_support::{budget, environment, probe};
    use crate::chaos::timeline::Observation;

    #[test]
    fn the_plan_names_every_vm_probe_and_the_deadline_and_every_refusal() {
        let env = environment("lab", "allowed: true");
        let spec: ChaosSpec = gates_core::yaml::from_str("{allowed: true, outage: 6m}").unwrap();
        let probes = vec![probe(
            "api-vip-new-connection",
            budget(90, 120),
            tokio::time::Instant::now(),
            |_| Observation::Up,
        )];
        let by = DateTime::parse_from_rfc3339("2026-11-29T20:30:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let text = plan_text(&env, &spec, &target(), &probes, by, &[]);
        for want in [
            "Chaos plan for lab (gate 4)",
            "    - vmid 201 talos-lab-cp-02 (node talos-lab-cp-02)",
            "    - api-vip-new-connection: api-vip-new-connection for a test; budget longest 1m 30s, total 2m",
            "  deadline: every VM running again by 2026-11-29T20:30:00.000Z",
            "  preflight: gates 1-3 pass, steady state, no host down",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        let refused = plan_text(
            &env,
            &spec,
            &target(),
            &probes,
            by,
            &["pve1 is down".into()],
        );
        assert!(
            refused.contains("  preflight: REFUSED\n    - pve1 is down"),
            "{refused}"
        );
    }

    #[test]
    fn a_refusal_lists_every_reason_at_once() {
        let env = environment("lab", "allowed: true");
        let err = refused(&env, &["gate 1 fails".into()], Some("no host".into()));
        assert_eq!(
            err.to_string(),
            "preflight refused the run on lab:\n  - gate 1 fails\n  - no host\nnothing was touched; fix each reason, then run `gates chaos lab` again (`--dry-run` shows the plan)"
        );
        assert_eq!(err.kind(), crate::chaos::ChaosErrorKind::Refused);
    }
}
