//! `gates chaos ENV`: the run, as a sequence of phases. Plan (admit, preflight, target,
//! probes), then journal, baseline, inject, observe, restore, recover and judge. Each phase
//! is a function of its own that emits to the reporters it is given and reads the one clock.

use std::sync::Arc;

use super::act::inject::inject;
use super::act::lease::{self, Claim, EnvLock, RunLease};
use super::act::restore::restore;
use super::act::signals::{Signals, signal_code, signal_name};
use super::clients::Clients;
use super::clock::{Clock, RealClock};
use super::context::Ctx;
use super::events::Events;
use super::journal::{Entry, Journal, RunLock};
use super::judge::assemble::{Assembly, assemble};
use super::judge::publish;
use super::judge::verdicts::{Measured, judge_run};
use super::observe::baseline::{Baseline, baseline};
use super::observe::leaders::leader_events;
use super::observe::observers::{ApiWatch, Observers};
use super::observe::outage::{RestoreReason, observe};
use super::observe::recover::recover;
use super::plan::admit::{admit, nothing_owed};
use super::plan::phase::{self as planning, plan_text};
use super::plan::timings::Timings;
use super::power::Power;
use super::probes::LeaderLog;
use super::progress::Progress;
use super::report::{self, Moments};
use super::reporters::plain::PlainText;
use super::reporters::{Reporters, RunEvent};
use super::vip::VipWatch;
use super::{ChaosError, cluster, journal_path, recovery};
use crate::cli::ChaosArgs;
use crate::collect;
use crate::config::{Config, Environment};

pub async fn run(config: &Config, env: &Environment, args: ChaosArgs) -> Result<u8, ChaosError> {
    run_with(config, env, args, &RealClock).await
}

async fn run_with(
    config: &Config,
    env: &Environment,
    args: ChaosArgs,
    clock: &dyn Clock,
) -> Result<u8, ChaosError> {
    let (spec, access) = admit(env, &args)?;
    let path = journal_path(args.journal.as_deref(), &args.reports, &env.name);
    // One run per environment on this machine, whatever the journal path; then the journal.
    let _env_lock = EnvLock::acquire(env).map_err(ChaosError::Refused)?;
    let _lock =
        RunLock::acquire(&path, &env.name).map_err(|e| ChaosError::Refused(e.to_string()))?;
    nothing_owed(&path, env)?;
    let plain: Arc<PlainText> = Arc::new(PlainText {
        format: args.format,
    });
    let out = Reporters::new()
        .with(Arc::new(Progress::new(clock.now())))
        .with(plain.clone());
    out.emit(RunEvent::Phase(&format!("preflight: reading {}", env.name)));

    // ---- plan ----
    let quiet = |err: ChaosError| {
        out.emit(RunEvent::Quiet);
        err
    };
    let clients = Clients::build(env, Timings::of(&spec, false).timeout)
        .await
        .map_err(|e| quiet(ChaosError::Failed(e)))?;
    // A run elsewhere holds the cluster's Lease: say so before anything else.
    if let Some(kube) = &clients.kube {
        lease::check(kube.clone(), &env.name, &spec.lease_namespace, clock.utc())
            .await
            .map_err(|e| quiet(ChaosError::Refused(e)))?;
    }
    let pre = planning::preflight(config, env).await;
    let planned = planning::plan(env, access, &spec, &args, &pre, clock.utc().date_naive())
        .await
        .map_err(quiet)?;
    let timings = planned.timings;
    let leaders = LeaderLog::default();
    let probes = planning::probes(config, env, &pre, &planned, &clients, &leaders)?;
    let restore_by = timings.restore_by(clock.utc());
    let target = &planned.target;
    out.emit(RunEvent::Quiet);
    out.emit(RunEvent::Plan(&plan_text(
        env,
        &spec,
        target,
        &probes,
        restore_by,
        &pre.refusals,
    )));
    if !pre.refusals.is_empty() {
        return Err(planning::refused(env, &pre.refusals, None));
    }
    if args.dry_run {
        out.emit(RunEvent::Plan("Dry run: nothing was touched.\n"));
        return Ok(0);
    }
    let Some(kube) = clients.kube.clone() else {
        return Err(ChaosError::Failed(
            "no Kubernetes client for the event watcher".into(),
        ));
    };

    // ---- the Lease and the journal, then observe ----
    let mut signals = Signals::install().map_err(ChaosError::Failed)?;
    let claim = Claim::new(restore_by, clock.utc());
    let until =
        restore_by + chrono::Duration::from_std(timings.recovery_timeout).unwrap_or_default();
    let run_lease = RunLease::acquire(
        kube.clone(),
        &env.name,
        &spec.lease_namespace,
        &claim,
        clock.utc(),
        until,
    )
    .await
    .map_err(ChaosError::Refused)?;
    let lease_text = format!(
        "Lease {}/{} taken before the first power action, given up after the run",
        run_lease.namespace, run_lease.name
    );
    let power = match open_journal(
        env, access, &path, &planned, restore_by, &timings, &run_lease,
    ) {
        Ok(power) => power,
        Err(err) => {
            let _ = run_lease.release(clock.utc()).await;
            return Err(err);
        }
    };
    let origin = clock.now();
    let started_at = clock.utc();
    let events = Events::default();
    let ctx = Ctx {
        env,
        clock,
        origin,
        out: Reporters::new()
            .with(Arc::new(Progress::new(origin)))
            .with(plain)
            .with(Arc::new(events.clone()))
            .with(Arc::new(power.clone())),
    };
    ctx.log(&format!("journal: {}", path.display()));
    let api = ApiWatch {
        client: kube,
        controllers: cluster::protected_controllers(config),
    };
    let observers = Observers::start(
        &ctx,
        &probes,
        &timings,
        Some(api),
        vip_watch(&clients, &pre.state),
        &events,
    );
    match baseline(&ctx, &observers, &mut signals, &timings).await {
        Baseline::Steady => {}
        Baseline::Interrupted(sig) => {
            let outcome = format!("interrupted by {} before the fault", signal_name(sig));
            finish_untouched(&ctx, observers, &outcome).await;
            release(&ctx, &power, run_lease).await;
            eprintln!("{outcome}; nothing was touched");
            return Ok(signal_code(sig));
        }
        Baseline::Unsteady(why) => {
            let why = why.join("; ");
            finish_untouched(&ctx, observers, &format!("aborted before the fault: {why}")).await;
            release(&ctx, &power, run_lease).await;
            return Err(ChaosError::Refused(format!(
                "steady state not met, nothing was touched: {why}"
            )));
        }
    }

    // ---- inject, observe, restore, recover ----
    let mut moments = Moments::default();
    let injected = inject(&ctx, &observers, &power, target, timings.outage).await;
    moments.fault = Some(injected.fault);
    let reason = observe(
        &ctx,
        &observers,
        &mut signals,
        &target.host,
        (injected.at, timings.outage),
        timings.interval,
        &injected.stop_errors,
    )
    .await;
    ctx.log(&format!("restoring: {reason}"));
    let restored = restore(
        &ctx,
        &observers,
        &power,
        target,
        injected.host_shut_down,
        timings.recovery_timeout,
        &reason,
    )
    .await;
    moments.restore = Some(restored.restore);
    moments.running_again = restored.running_again;
    let controller_checks = recovery::controller_checks(config);
    let recovered = recover(
        &ctx,
        &observers,
        &mut signals,
        &timings,
        restored.start_errors.is_empty(),
        || async {
            let fresh = collect::live(config, env).await;
            recovery::outstanding(env, &fresh, &controller_checks)
        },
    )
    .await;
    moments.recovered = recovered.recovered;
    // A few more samples after recovery show the probes settled (short, even after a signal).
    tokio::time::sleep(timings.interval * 2).await;

    // ---- judge ----
    let samples = observers.stop().await;
    ctx.out.emit(RunEvent::Quiet);
    leader_events(&leaders, &pre.state, origin, &events);
    let interrupted = match reason {
        RestoreReason::Signal(sig) => Some(sig),
        _ => recovered.interrupted,
    };
    let issued = power.issued();
    let judged = judge_run(&Measured {
        environment: &env.name,
        probes: &probes,
        samples: &samples,
        target,
        start_errors: &restored.start_errors,
        recovery: &recovered,
        recovery_timeout: timings.recovery_timeout,
        controller_checks: controller_checks.len(),
        issued: &issued,
        reason: &reason,
        interrupted,
        lease: Some(&lease_text),
    });
    let stem = report::stem(&args.reports, &env.name, started_at);
    let (chaos_report, timeline) = assemble(
        Assembly {
            config,
            environment: &env.name,
            target,
            reports: &args.reports,
            started_at,
            finished_at: clock.utc(),
            sample_interval: timings.interval,
            moments,
            probes: &probes,
            samples,
            issued,
            events: events.all(),
        },
        &judged,
    );
    ctx.out.emit(RunEvent::Finished(&format!(
        "{}; verdict {}",
        judged.outcome,
        judged.verdict.as_str()
    )));
    publish::print(args.format, &chaos_report);
    publish::write(&chaos_report, &timeline, &stem, args.junit.as_deref());
    release(&ctx, &power, run_lease).await;
    if !restored.start_errors.is_empty() {
        return Err(ChaosError::RestoreFailed(format!(
            "VMs may still be stopped: {}; run `gates recover {}`",
            restored.start_errors.join("; "),
            env.name
        )));
    }
    Ok(match interrupted {
        Some(sig) => signal_code(sig),
        None => judged.tally.exit_code(),
    })
}

/// The journal, with the plan on disk, and the power actions that write to it.
fn open_journal(
    env: &Environment,
    access: &crate::config::ProxmoxAccess,
    path: &std::path::Path,
    planned: &planning::Planned,
    restore_by: chrono::DateTime<chrono::Utc>,
    timings: &Timings,
    run_lease: &RunLease,
) -> Result<Power, ChaosError> {
    let mut journal = Journal::create(path, &planned.target.fault(&env.name, restore_by))
        .map_err(|e| ChaosError::Refused(e.to_string()))?;
    journal
        .append(Entry::LeaseTaken {
            namespace: run_lease.namespace.clone(),
            name: run_lease.name.clone(),
            holder: run_lease.holder.clone(),
        })
        .map_err(|e| ChaosError::Failed(e.to_string()))?;
    let pve = match planned.wake_client.clone() {
        Some(client) => client,
        None => collect::proxmox::client(env, access).map_err(ChaosError::Failed)?,
    };
    Ok(Power::new(pve, timings.power_poll(), journal))
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

/// The run ends before the fault: watchers stopped, the journal told why.
async fn finish_untouched(ctx: &Ctx<'_>, observers: Observers<'_>, outcome: &str) {
    observers.stop().await;
    ctx.out.emit(RunEvent::Quiet);
    ctx.out.emit(RunEvent::Finished(outcome));
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
