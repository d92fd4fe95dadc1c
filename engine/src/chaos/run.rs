//! `gates chaos ENV`: the run, as a sequence of phases. Plan (admit, preflight, target,
//! probes), then journal, baseline, inject, observe, restore, recover and judge. Each phase
//! is a function of its own that emits to the reporters it is given and reads the one clock.

use super::prediction;
use crate::state::provenance::Provenance;
use gates_core::exit::ExitCode;
use gates_core::hostloss::attach::{AttachUnknown, Held};
use std::sync::Arc;

use super::act::inject::inject;
use super::act::lease::{self, Claim, EnvLock, RunLease};
use super::act::restore::{Restored, restore};
use super::act::signals::{Signals, signal_name};
use super::clients::Clients;
use super::clock::{Clock, RealClock};
use super::context::Ctx;
use super::events::Events;
use super::journal::FaultKind;
use super::journal::{Entry, Journal, RunLock};
use super::judge::assemble::{Assembly, assemble};
use super::judge::split_brain;
use super::judge::verdicts::{Measured, judge_run};
use super::observe::baseline::{Baseline, baseline};
use super::observe::leaders::leader_events;
use super::observe::observers::{ApiWatch, Observers};
use super::observe::outage::{RestoreReason, observe};
use super::observe::recover::{Recovery, recover};
use super::observe::split_brain::BrainWatch;
use super::plan::admit::{admit, nothing_owed};
use super::plan::phase::{self as planning, Planned, Preflight, plan_text};
use super::plan::timings::Timings;
use super::power::Power;
use super::probes::{LeaderLog, Probe};
use super::report::{self, Moments};
use super::reporters::{Reporters, RunEvent};
use super::vip::VipWatch;
use super::{ChaosError, JournalStep, journal_path, recovery};
use crate::chaos::ChaosOptions;
use crate::cluster;
use crate::collect;
use crate::config::{ChaosSpec, Config, Environment, ProxmoxAccess};
use chrono::{DateTime, Utc};

/// The run, told to `reporters` as it happens; its results (the record, the timeline and where
/// their files go) are handed to them at the end, for them to print and write.
pub async fn run(
    config: &Config,
    env: &Environment,
    args: &ChaosOptions,
    reporters: &Reporters<'_>,
) -> Result<ExitCode, ChaosError> {
    run_with(config, env, args, &RealClock, reporters).await
}

async fn run_with(
    config: &Config,
    env: &Environment,
    args: &ChaosOptions,
    clock: &dyn Clock,
    reporters: &Reporters<'_>,
) -> Result<ExitCode, ChaosError> {
    let (spec, access) = admit(env, args)?;
    let path = journal_path(args.journal.as_deref(), &args.reports, &env.name);
    // One run per environment on this machine, whatever the journal path; then the journal.
    let _env_lock = EnvLock::acquire(env)?;
    let _lock = RunLock::acquire(&path, &env.name)
        .map_err(ChaosError::journal(&env.name, JournalStep::Lock))?;
    nothing_owed(&path, env)?;
    let run = Run {
        config,
        env,
        args,
        clock,
        spec: &spec,
        access,
        reporters,
    };
    match prepare(&run).await? {
        Some(prepared) => execute(&run, &path, prepared).await,
        None => Ok(ExitCode::Passed),
    }
}

/// What every part of the run reads.
struct Run<'a> {
    config: &'a Config,
    env: &'a Environment,
    args: &'a ChaosOptions,
    clock: &'a dyn Clock,
    spec: &'a ChaosSpec,
    access: &'a ProxmoxAccess,
    /// The caller's reporters (the progress display, the plan's and the results' readers).
    reporters: &'a Reporters<'a>,
}

/// What the plan phase hands to the rest of the run.
struct Prepared {
    clients: Clients,
    kube: kube::Client,
    pre: Preflight,
    planned: Planned,
    leaders: LeaderLog,
    probes: Vec<Probe>,
    restore_by: DateTime<Utc>,
    /// The host-loss model's prediction for the target host, held beside the measurement.
    predicted: Option<crate::hostloss::HostLoss>,
}

/// Plan: clients, the Lease check, preflight, target and probes, the plan said. `None` when
/// the run ends there (a dry run).
async fn prepare(run: &Run<'_>) -> Result<Option<Prepared>, ChaosError> {
    let (env, clock, spec) = (run.env, run.clock, run.spec);
    let out = run.reporters;
    out.emit(RunEvent::Begin(clock.now()));
    out.emit(RunEvent::Phase(&format!("preflight: reading {}", env.name)));
    let quiet = |err: ChaosError| {
        out.emit(RunEvent::Quiet);
        err
    };
    let clients = Clients::build(env, Timings::of(spec, false).timeout)
        .await
        .map_err(|reason| {
            quiet(ChaosError::Setup {
                env: env.name.clone(),
                what: "clients",
                reason: reason.to_string(),
            })
        })?;
    // A run elsewhere holds the cluster's Lease: say so before anything else.
    if let Ok(kube) = &clients.kube {
        lease::check(kube.clone(), &env.name, &spec.lease_namespace, clock.utc())
            .await
            .map_err(|err| quiet(ChaosError::LeaseHeld(Box::new(err))))?;
    }
    let pre = planning::preflight(run.config, env, &clients).await;
    let today = clock.utc().date_naive();
    let planned = planning::plan(env, run.access, spec, run.args, &pre, today)
        .await
        .map_err(quiet)?;
    let leaders = LeaderLog::default();
    let probes = planning::probes(run.config, env, &pre, &planned, &clients, &leaders)?;
    let restore_by = planned.timings.restore_by(clock.utc());
    out.emit(RunEvent::Quiet);
    out.emit(RunEvent::Plan(&plan_text(
        env,
        spec,
        &planned.target,
        &probes,
        restore_by,
        &pre.refusals,
    )));
    let predicted = prediction::for_target(
        run.config,
        env,
        &pre.state,
        &planned.target.host,
        planned.target.fault,
    );
    out.emit(RunEvent::Plan(&prediction::plan_section(
        predicted.as_ref(),
    )));
    if !pre.refusals.is_empty() {
        return Err(planning::refused(env, &pre.refusals, None));
    }
    if let Some(refused) = prediction::refusal(predicted.as_ref(), run.args.expect_failure) {
        return Err(refused);
    }
    if run.args.dry_run {
        out.emit(RunEvent::Plan("Dry run: nothing was touched.\n"));
        return Ok(None);
    }
    let Clients {
        access,
        kube,
        talos,
    } = clients;
    let kube = kube.map_err(|source| ChaosError::NoKubeClient {
        env: env.name.clone(),
        source: Box::new(source),
    })?;
    let clients = Clients {
        access,
        kube: Ok(kube.clone()),
        talos,
    };
    Ok(Some(Prepared {
        clients,
        kube,
        pre,
        planned,
        leaders,
        probes,
        restore_by,
        predicted,
    }))
}

/// The Lease and the journal, then baseline, inject, observe, restore and recover.
async fn execute(
    run: &Run<'_>,
    path: &std::path::Path,
    p: Prepared,
) -> Result<ExitCode, ChaosError> {
    let (env, clock, timings) = (run.env, run.clock, p.planned.timings);
    let mut signals = Signals::install()?;
    // One run per cluster on this machine, whatever the environment is called.
    let _cluster_lock = EnvLock::acquire_cluster(env, &p.pre.state.cluster_identity)?;
    let (run_lease, power) = lease_and_journal(run, path, &p).await?;
    let origin = clock.now();
    let events = Events::default();
    let ctx = Ctx {
        env,
        clock,
        origin,
        out: run
            .reporters
            .with(Arc::new(events.clone()))
            .with(Arc::new(power.clone())),
    };
    ctx.out.emit(RunEvent::Begin(origin));
    let started_at = clock.utc();
    ctx.log(&format!("journal: {}", path.display()));
    let api = ApiWatch {
        client: p.kube.clone(),
        controllers: cluster::protected_controllers(&run.config.gates),
    };
    let vip = vip_watch(&p.clients, &p.pre.state);
    let mut observers = Observers::start(&ctx, &p.probes, &timings, Some(api), vip, &events);
    let brain = (p.planned.target.fault == FaultKind::Partition).then(|| {
        let (watch, unwatched) = brain_watch(&p.clients, &p.pre.state, &p.kube);
        (
            observers.watch_split_brain(&ctx, &timings, watch),
            unwatched,
        )
    });
    match baseline(&ctx, &observers, &mut signals, &timings).await {
        Baseline::Steady => {}
        Baseline::Interrupted(sig) => {
            let outcome = format!("interrupted by {} before the fault", signal_name(sig));
            finish_untouched(&ctx, observers, &power, run_lease, &outcome).await;
            ctx.out
                .emit(RunEvent::Note(&format!("{outcome}; nothing was touched")));
            return Ok(ExitCode::Signalled(sig));
        }
        Baseline::Unsteady(why) => {
            let outcome = format!("aborted before the fault: {}", why.join("; "));
            finish_untouched(&ctx, observers, &power, run_lease, &outcome).await;
            return Err(ChaosError::Unsteady {
                env: env.name.clone(),
                why,
            });
        }
    }
    let acted = act(run, &ctx, &observers, &power, &p, &mut signals).await;
    // A few more samples after recovery show the probes settled (short, even after a signal).
    tokio::time::sleep(timings.interval * 2).await;
    let samples = observers.stop().await;
    ctx.out.emit(RunEvent::Quiet);
    leader_events(&p.leaders, &p.pre.state, origin, &events);
    let split_brain = brain.map(|(log, unwatched)| judge_split_brain(&log, &unwatched, &p, &acted));
    let ran = Ran {
        started_at,
        moments: acted.moments,
        samples,
        reason: acted.reason,
        restored: acted.restored,
        recovered: acted.recovered,
        held: acted.held,
        split_brain,
        controller_checks: acted.controller_checks,
        lease: format!(
            "Lease {}/{} taken before the first power action, given up after the run",
            run_lease.namespace, run_lease.name
        ),
    };
    let code = conclude(run, &ctx, &p, &power, &events, ran);
    release(&ctx, &power, run_lease).await;
    code
}

/// The cluster's Lease for this run, then the journal with the plan on disk (the Lease given
/// back when the journal cannot be opened).
async fn lease_and_journal(
    run: &Run<'_>,
    path: &std::path::Path,
    p: &Prepared,
) -> Result<(RunLease, Power), ChaosError> {
    let (env, clock, timings) = (run.env, run.clock, p.planned.timings);
    let claim = Claim::new(p.restore_by, clock.utc());
    let until =
        p.restore_by + chrono::Duration::from_std(timings.recovery_timeout).unwrap_or_default();
    let run_lease = RunLease::acquire(
        p.kube.clone(),
        &env.name,
        &run.spec.lease_namespace,
        &claim,
        clock.utc(),
        until,
    )
    .await
    .map_err(|source| ChaosError::LeaseNotTaken {
        env: env.name.clone(),
        source: Box::new(source),
    })?;
    // Which cluster this run acts on: recorded in the journal and in the report.
    let provenance = Provenance::of(env, &p.pre.state, p.pre.state.collected_at);
    match open_journal(
        env,
        run.access,
        path,
        &p.planned,
        p.restore_by,
        &run_lease,
        &provenance,
    ) {
        Ok(power) => Ok((run_lease, power)),
        Err(err) => {
            let _ = run_lease.release(clock.utc()).await;
            Err(err)
        }
    }
}

/// What the acting phases did and saw.
struct Acted {
    moments: Moments,
    reason: RestoreReason,
    held: Option<Result<Held, AttachUnknown>>,
    restored: Restored,
    recovered: Recovery,
    controller_checks: usize,
}

/// Inject the fault, observe the outage, restore, and wait for recovery.
async fn act(
    run: &Run<'_>,
    ctx: &Ctx<'_>,
    observers: &Observers<'_>,
    power: &Power,
    p: &Prepared,
    signals: &mut Signals,
) -> Acted {
    let (env, timings) = (run.env, p.planned.timings);
    let target = &p.planned.target;
    let mut moments = Moments::default();
    let injected = inject(ctx, observers, power, target, timings.outage).await;
    moments.fault = Some(injected.fault);
    let reason = observe(
        ctx,
        observers,
        signals,
        &target.host,
        (injected.at, timings.outage),
        timings.interval,
        &injected.stop_errors,
    )
    .await;
    let held = held_at_outage_end(env, &p.clients.kube, target, &reason).await;
    ctx.log(&format!("restoring: {reason}"));
    let restored = restore(
        ctx,
        observers,
        power,
        target,
        injected.host_shut_down,
        timings.recovery_timeout,
        &reason,
    )
    .await;
    moments.restore = Some(restored.restore);
    moments.running_again = restored.running_again;
    let controller_checks = recovery::controller_checks(run.config);
    let recovered = recover(
        ctx,
        observers,
        signals,
        &timings,
        restored.start_errors.is_empty(),
        || async {
            let fresh = collect::live_with(run.config, env, &p.clients.kube).await;
            recovery::outstanding(env, &fresh, &controller_checks)
        },
    )
    .await;
    moments.recovered = recovered.recovered;
    Acted {
        moments,
        reason,
        held,
        restored,
        recovered,
        controller_checks: controller_checks.len(),
    }
}

/// The split-brain signals of a partition run, from the samples of its watch.
fn judge_split_brain(
    log: &super::observe::split_brain::BrainLog,
    unwatched: &Unwatched,
    p: &Prepared,
    acted: &Acted,
) -> Vec<split_brain::SignalOutcome> {
    let samples = log.lock().map(|l| l.clone()).unwrap_or_default();
    let cut_off: Vec<String> = p
        .planned
        .target
        .vms
        .iter()
        .map(|v| v.node.clone())
        .collect();
    split_brain::judge(
        &samples,
        &split_brain::Partition {
            cut_off: &cut_off,
            fault: acted.moments.fault,
            back: acted.moments.running_again,
            vip_unwatched: unwatched.vip.clone(),
            talos_unwatched: unwatched.talos.clone(),
        },
    )
}

/// What the acting phases measured.
struct Ran {
    started_at: DateTime<Utc>,
    moments: Moments,
    samples: Vec<Vec<crate::chaos::timeline::Sample>>,
    reason: RestoreReason,
    restored: Restored,
    recovered: Recovery,
    /// Pods the lost nodes held their volumes for at the end of the outage.
    held: Option<Result<Held, AttachUnknown>>,
    split_brain: Option<Vec<split_brain::SignalOutcome>>,
    controller_checks: usize,
    lease: String,
}

/// Judge: the verdicts, the journal's last line, the record handed to the reporters (which
/// print it and write its files), the exit code.
fn conclude(
    run: &Run<'_>,
    ctx: &Ctx<'_>,
    p: &Prepared,
    power: &Power,
    events: &Events,
    ran: Ran,
) -> Result<ExitCode, ChaosError> {
    let env = run.env;
    let target = &p.planned.target;
    let interrupted = match ran.reason {
        RestoreReason::Signal(sig) => Some(sig),
        _ => ran.recovered.interrupted,
    };
    let issued = power.issued();
    let judged = judge_run(&Measured {
        environment: &env.name,
        probes: &p.probes,
        samples: &ran.samples,
        target,
        start_errors: &ran.restored.start_errors,
        recovery: &ran.recovered,
        recovery_timeout: p.planned.timings.recovery_timeout,
        controller_checks: ran.controller_checks,
        issued: &issued,
        reason: &ran.reason,
        interrupted,
        lease: Some(&ran.lease),
        edge_slack: p.planned.timings.interval + p.planned.timings.timeout,
        held: ran.held.as_ref(),
        split_brain: ran.split_brain.as_deref(),
    });
    let stem = report::stem(&run.args.reports, &env.name, ran.started_at);
    let all_events = events.all();
    let compared = p.predicted.as_ref().map(|h| {
        prediction::compare(
            h,
            &judged.outcomes,
            &all_events,
            ran.moments.fault.map(std::time::Duration::from_secs_f64),
        )
    });
    let (chaos_report, timeline) = assemble(
        Assembly {
            config: run.config,
            environment: &env.name,
            target,
            reports: &run.args.reports,
            stem: &stem,
            started_at: ran.started_at,
            finished_at: ctx.clock.utc(),
            sample_interval: p.planned.timings.interval,
            moments: ran.moments,
            probes: &p.probes,
            samples: ran.samples,
            issued,
            events: all_events,
            prediction: compared,
            provenance: Some(Provenance::of(env, &p.pre.state, p.pre.state.collected_at)),
        },
        &judged,
    );
    ctx.out.emit(RunEvent::Finished(&format!(
        "{}; verdict {}",
        judged.outcome,
        judged.verdict.as_str()
    )));
    ctx.out.emit(RunEvent::Record {
        record: &chaos_report,
        timeline: &timeline,
        stem: &stem,
        junit: run.args.junit.as_deref(),
    });
    if !ran.restored.start_errors.is_empty() {
        return Err(ChaosError::NotStarted {
            env: env.name.clone(),
            errors: ran.restored.start_errors.clone(),
        });
    }
    Ok(match interrupted {
        Some(sig) => ExitCode::Signalled(sig),
        None => judged.tally.exit_code(),
    })
}

/// What the lost nodes' pods still hold at the end of the outage: pods Terminating there with
/// a ReadWriteOnce Longhorn volume attached there, which only a person's force delete frees
/// while the host stays down. Not read after a failed stop (nothing was lost) or a signal
/// (restoring comes first).
async fn held_at_outage_end(
    env: &Environment,
    kube: &Result<kube::Client, collect::kube::KubeError>,
    target: &super::plan::Target,
    reason: &RestoreReason,
) -> Option<Result<Held, AttachUnknown>> {
    match reason {
        RestoreReason::StopFailed(_) | RestoreReason::Signal(_) => None,
        RestoreReason::Deadline | RestoreReason::OverBudget { .. } => {
            let state = collect::kube::collect(env, kube).await;
            let lost: Vec<String> = target.vms.iter().map(|v| v.node.clone()).collect();
            Some(gates_core::hostloss::attach::held_on(&state, &lost))
        }
    }
}

/// The journal, with the plan on disk, and the power actions that write to it.
fn open_journal(
    env: &Environment,
    access: &ProxmoxAccess,
    path: &std::path::Path,
    planned: &Planned,
    restore_by: DateTime<Utc>,
    run_lease: &RunLease,
    provenance: &Provenance,
) -> Result<Power, ChaosError> {
    let mut fault = planned.target.fault(&env.name, restore_by);
    fault.provenance = Some(Box::new(provenance.clone()));
    let mut journal = Journal::create(path, &fault)
        .map_err(ChaosError::journal(&env.name, JournalStep::Create))?;
    journal
        .append(Entry::LeaseTaken {
            namespace: run_lease.namespace.clone(),
            name: run_lease.name.clone(),
            holder: run_lease.holder.clone(),
        })
        .map_err(ChaosError::journal(&env.name, JournalStep::Append))?;
    let pve = match planned.wake_client.clone() {
        Some(client) => client,
        None => {
            collect::proxmox::client(env, access).map_err(|source| ChaosError::ProxmoxClient {
                env: env.name.clone(),
                url: access.url.clone(),
                source: Box::new(source),
            })?
        }
    };
    Ok(Power::new(pve, planned.timings.power_poll(), journal))
}

/// Give the Lease up and say so in the journal; a Lease that cannot be released expires.
async fn release(ctx: &Ctx<'_>, power: &Power, run_lease: RunLease) {
    let (namespace, name) = (run_lease.namespace.clone(), run_lease.name.clone());
    match run_lease.release(ctx.clock.utc()).await {
        Ok(()) => {
            let _ = power.note(Entry::LeaseReleased { namespace, name });
        }
        Err(err) => ctx.log(&format!("warning: {err}")),
    }
}

/// The run ends before the fault: watchers stopped, the journal told why, the Lease given up.
async fn finish_untouched(
    ctx: &Ctx<'_>,
    observers: Observers<'_>,
    power: &Power,
    run_lease: RunLease,
    outcome: &str,
) {
    observers.stop().await;
    ctx.out.emit(RunEvent::Quiet);
    ctx.out.emit(RunEvent::Finished(outcome));
    release(ctx, power, run_lease).await;
}

/// The VIP holder, from every control plane's Talos addresses (when the VIP is known).
fn vip_watch(clients: &Clients, state: &crate::state::State) -> Option<VipWatch> {
    match (&clients.talos, state.talos.present(), state.api.present()) {
        (Some(pool), Some(talos), Some(api)) if !api.vip_addresses.is_empty() => Some(VipWatch {
            pool: pool.clone(),
            endpoints: talos
                .endpoints
                .iter()
                .map(|e| {
                    let node = talos.node_of(e).unwrap_or_else(|| e.endpoint.clone());
                    (e.endpoint.clone(), node)
                })
                .collect(),
            vip: api.vip_addresses.clone(),
        }),
        _ => None,
    }
}

/// Why part of the split-brain watch cannot read: the VIP, or the Talos API altogether.
#[derive(Default)]
struct Unwatched {
    vip: Option<String>,
    talos: Option<String>,
}

/// The split-brain watch of every control plane the preflight read, and what it cannot see.
fn brain_watch(
    clients: &Clients,
    state: &crate::state::State,
    kube: &kube::Client,
) -> (BrainWatch, Unwatched) {
    let mut unwatched = Unwatched::default();
    let endpoints: Vec<(String, String)> = match state.talos.present() {
        Some(talos) => talos
            .endpoints
            .iter()
            .map(|e| {
                let node = talos.node_of(e).unwrap_or_else(|| e.endpoint.clone());
                (e.endpoint.clone(), node)
            })
            .collect(),
        None => Vec::new(),
    };
    let pool = match (&clients.talos, endpoints.is_empty()) {
        (Some(pool), false) => Some(pool.clone()),
        _ => {
            unwatched.talos = Some(
                "no control plane's Talos API was read at preflight: set talos.endpoints and the talosconfig in the environment file".into(),
            );
            None
        }
    };
    let vip = state
        .api
        .present()
        .map(|api| api.vip_addresses.clone())
        .unwrap_or_default();
    if vip.is_empty() {
        unwatched.vip = Some(
            "the API VIP's address is not known (the API endpoint was not read, or its name did not resolve at preflight): check the environment file's API endpoint".into(),
        );
    } else if let Some(why) = &unwatched.talos {
        unwatched.vip = Some(why.clone());
    }
    let watch = BrainWatch {
        endpoints: if pool.is_some() {
            endpoints
        } else {
            Vec::new()
        },
        pool,
        vip,
        kube: kube.clone(),
    };
    (watch, unwatched)
}
