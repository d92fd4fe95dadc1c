//! `gates chaos ENV`: the run itself, phase by phase.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use libtest_mimic::{Arguments, ColorSetting, FormatSetting};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::budget::{ProbeOutcome, judge};
use super::events::{self, Events};
use super::journal::{Entry, Journal};
use super::plan::{self, Target};
use super::power::{self, Power};
use super::probes::{self, Probe, ProbeInputs};
use super::progress::{ProbeLine, Progress};
use super::report::{self, ChaosReport, Moments, Timeline};
use super::sampler::{self, Live};
use super::talos_pool::TalosPool;
use super::timeline::{Observation, Sample};
use super::{ChaosError, cluster, journal_path, preflight, recovery};
use crate::cli::{ChaosArgs, Format};
use crate::collect;
use crate::config::{ChaosSpec, Config, Environment};
use crate::runner::{self, Tally, TrialResult};
use crate::verdict::{Finding, Verdict};

/// The exit code of a run ended by a signal: 128 + the signal number.
fn signal_code(signal: i32) -> u8 {
    128u8.saturating_add(signal as u8)
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        2 => "SIGINT",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// SIGINT and SIGTERM, caught from just before the journal is written: from then on a
/// signal ends the outage and the run restores before it exits.
struct Signals {
    rx: watch::Receiver<Option<i32>>,
}

impl Signals {
    fn install() -> Result<Signals, String> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt =
            signal(SignalKind::interrupt()).map_err(|e| format!("cannot catch SIGINT: {e}"))?;
        let mut terminate =
            signal(SignalKind::terminate()).map_err(|e| format!("cannot catch SIGTERM: {e}"))?;
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            loop {
                let got = tokio::select! {
                    _ = interrupt.recv() => 2,
                    _ = terminate.recv() => 15,
                };
                // The first signal counts; later ones are swallowed so restore can finish.
                tx.send_if_modified(|current| {
                    if current.is_none() {
                        *current = Some(got);
                        true
                    } else {
                        false
                    }
                });
            }
        });
        Ok(Signals { rx })
    }

    fn received(&self) -> Option<i32> {
        *self.rx.borrow()
    }

    /// Sleep until `until`, or return early with the signal.
    async fn sleep_until(&mut self, until: Instant) -> Option<i32> {
        if let Some(sig) = self.received() {
            return Some(sig);
        }
        tokio::select! {
            _ = tokio::time::sleep_until(until) => self.received(),
            _ = self.rx.changed() => self.received(),
        }
    }
}

/// Where the human-readable plan goes: stdout, unless stdout carries JSON.
fn say(format: Format, text: &str) {
    if format == Format::Json {
        eprint!("{text}");
    } else {
        print!("{text}");
        let _ = std::io::stdout().flush();
    }
}

pub async fn run(config: &Config, env: &Environment, args: ChaosArgs) -> Result<u8, ChaosError> {
    let spec = match &env.chaos {
        Some(spec) if spec.allowed => spec.clone(),
        _ => {
            return Err(ChaosError::Refused(format!(
                "chaos is not allowed on {}: its file {} must say `chaos: {{allowed: true}}`",
                env.name,
                env.file.display()
            )));
        }
    };
    if env.gate_name() == "production" && !args.yes {
        return Err(ChaosError::Refused(format!(
            "{} is a production environment: the chaos step needs --yes",
            env.name
        )));
    }
    let access = env.proxmox.as_ref().ok_or_else(|| {
        ChaosError::Refused(format!(
            "{} has no proxmox section: the chaos step powers VMs off through Proxmox",
            env.file.display()
        ))
    })?;
    // An earlier run that died owes a restore: that comes before anything else.
    let path = journal_path(args.journal.as_deref(), &args.reports, &env.name);
    let _lock = super::journal::RunLock::acquire(&path, &env.name)
        .map_err(|e| ChaosError::Refused(e.to_string()))?;
    if path.exists() {
        let records = super::journal::read(&path).map_err(|e| ChaosError::Failed(e.to_string()))?;
        if let Some(owed) = super::journal::owed_text(&records) {
            return Err(ChaosError::Refused(format!(
                "{}: an earlier chaos run has not restored what it stopped ({owed}); run `gates recover {}` first",
                path.display(),
                env.name
            )));
        }
    }
    let progress = Progress::new(Instant::now());
    progress.phase(&format!("preflight: reading {}", env.name));

    // ---- preflight and plan ----
    let state = collect::live(config, env).await;
    let specs = runner::trials(config, env);
    let gated: Vec<&runner::TrialSpec> =
        // The host-loss check judges every host; the run holds only its target to the
        // prediction (below), so `--expect-failure` can measure a predicted failure.
        specs
            .iter()
            .filter(|s| (1..=3).contains(&s.gate) && s.check.kind() != "host-loss")
            .collect();
    let gate_results = runner::evaluate(&gated, env, &state);
    let controllers = cluster::protected_controllers(config);
    let refusals = preflight::refusals(&state, &gate_results, &controllers);
    let Some(proxmox) = state.proxmox.present() else {
        progress.finish();
        return Err(ChaosError::Refused(format!(
            "preflight refused the run on {}:\n  - {}",
            env.name,
            refusals.join("\n  - ")
        )));
    };
    // Without a target there is no plan to print; say every reason at once.
    let refuse = |why: String| {
        progress.finish();
        let mut all = refusals.clone();
        all.push(why);
        ChaosError::Refused(format!(
            "preflight refused the run on {}:\n  - {}",
            env.name,
            all.join("\n  - ")
        ))
    };
    let (host, reason) =
        plan::choose_host(&args.host, &state, proxmox, Utc::now().date_naive()).map_err(refuse)?;
    let mut target = plan::target(env, proxmox, &host, reason, args.whole_host).map_err(refuse)?;
    // Whole-host mode acts through another host's API: the one that can wake this host.
    let wake_client = if target.whole_host {
        let (client, how) = super::host_power::prepare(env, access, &host)
            .await
            .map_err(refuse)?;
        target.host_power = Some(how);
        Some(client)
    } else {
        None
    };
    let interval: Duration = spec.sample_interval.into();
    let outage: Duration = spec.outage.into();
    let recovery_timeout: Duration = spec.recovery_timeout.into();
    let baseline = (interval * 10).clamp(Duration::from_secs(1), Duration::from_secs(10));
    let stopped_nodes: Vec<String> = target.vms.iter().map(|v| v.node.clone()).collect();
    let (surviving, members) = state
        .talos
        .present()
        .map(|t| probes::surviving_endpoints(t, &stopped_nodes))
        .unwrap_or_default();
    let cluster_access = collect::api::cluster_access(env).map_err(ChaosError::Failed)?;
    let kube = collect::kube::client(env).await.ok();
    let timeout = (interval * 4).clamp(Duration::from_secs(1), Duration::from_secs(5));
    let leaders = probes::LeaderLog::default();
    let talos = probes::talos_client(env, timeout)
        .transpose()
        .map_err(ChaosError::Failed)?
        .map(TalosPool::new);
    let probes = probes::build(ProbeInputs {
        env,
        access: &cluster_access,
        kube: kube.clone(),
        controllers: controllers.clone(),
        talos: talos.clone(),
        surviving_talos: surviving,
        etcd_members: members,
        interval,
        timeout,
        leaders: leaders.clone(),
    })
    .map_err(ChaosError::Failed)?;
    // A woken host boots before its VMs can start: give it the recovery timeout too.
    let boot = if target.whole_host {
        recovery_timeout
    } else {
        Duration::ZERO
    };
    let restore_by = Utc::now()
        + chrono::Duration::from_std(baseline + outage + boot + Duration::from_secs(300))
            .unwrap_or_else(|_| chrono::Duration::hours(1));
    let fault = target.fault(&env.name, restore_by);
    progress.finish();
    say(
        args.format,
        &plan_text(env, &spec, &target, &probes, restore_by, &refusals),
    );
    let predicted = super::prediction::for_target(config, env, &state, &target.host);
    say(
        args.format,
        &super::prediction::plan_section(predicted.as_ref()),
    );
    if !refusals.is_empty() {
        return Err(ChaosError::Refused(format!(
            "preflight refused the run on {}:\n  - {}",
            env.name,
            refusals.join("\n  - ")
        )));
    }
    if let Some(why) = super::prediction::refusal(predicted.as_ref(), args.expect_failure) {
        return Err(ChaosError::Refused(why));
    }
    if args.dry_run {
        say(args.format, "Dry run: nothing was touched.\n");
        return Ok(0);
    }
    let Some(kube) = kube else {
        return Err(ChaosError::Failed(
            "no Kubernetes client for the event watcher".into(),
        ));
    };

    // ---- journal, then observe ----
    let mut signals = Signals::install().map_err(ChaosError::Failed)?;
    let journal = Journal::create(&path, &fault).map_err(|e| ChaosError::Refused(e.to_string()))?;
    let pve = match wake_client {
        Some(client) => client,
        None => collect::proxmox::client(env, access).map_err(ChaosError::Failed)?,
    };
    let power = Power::new(
        pve,
        interval.clamp(Duration::from_millis(100), Duration::from_secs(1)),
        journal,
    );
    let origin = Instant::now();
    let started_at = Utc::now();
    let progress = Progress::new(origin);
    progress.line(&format!("journal: {}", path.display()));
    let events = Events::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut lives: Vec<Live> = Vec::new();
    let mut samplers: Vec<JoinHandle<Vec<Sample>>> = Vec::new();
    for probe in &probes {
        let live: Live = Arc::default();
        let sample = probe.sample.clone();
        samplers.push(tokio::spawn(sampler::sample(
            origin,
            interval,
            timeout,
            stop_rx.clone(),
            live.clone(),
            move || sample(),
        )));
        lives.push(live);
    }
    let watcher = tokio::spawn(events::watch(
        kube,
        controllers.clone(),
        origin,
        interval,
        events.clone(),
        stop_rx.clone(),
    ));
    // The VIP holder, from every control plane's Talos addresses (when the VIP is known).
    let vip_watcher = match (talos, state.talos.present(), state.api.present()) {
        (Some(pool), Some(talos), Some(api)) if !api.vip_addresses.is_empty() => {
            Some(tokio::spawn(super::vip::watch(
                super::vip::VipWatch {
                    pool,
                    endpoints: talos
                        .endpoints
                        .iter()
                        .map(|e| {
                            let node = talos.node_of(e).unwrap_or_else(|| e.endpoint.clone());
                            (e.endpoint.clone(), node)
                        })
                        .collect(),
                    vip: api.vip_addresses.clone(),
                },
                origin,
                interval,
                timeout.mul_f64(0.75),
                events.clone(),
                stop_rx.clone(),
            )))
        }
        _ => None,
    };
    let mut moments = Moments::default();
    let show = |phase: Option<&str>| {
        if let Some(phase) = phase {
            progress.phase(phase);
        }
        progress.probes(live_lines(&probes, &lives));
    };

    progress.phase(&format!("baseline: sampling {} probes", probes.len()));
    let baseline_end = origin + baseline;
    let mut interrupted = None;
    while Instant::now() < baseline_end && interrupted.is_none() {
        interrupted = signals
            .sleep_until((Instant::now() + interval).min(baseline_end))
            .await;
        show(None);
    }
    let unsteady = unsteady_probes(&probes, &lives);
    if interrupted.is_some() || !unsteady.is_empty() {
        let _ = stop_tx.send(true);
        for handle in samplers {
            let _ = handle.await;
        }
        let _ = watcher.await;
        if let Some(vip) = vip_watcher {
            let _ = vip.await;
        }
        progress.finish();
        let outcome = match interrupted {
            Some(sig) => format!("interrupted by {} before the fault", signal_name(sig)),
            None => format!("aborted before the fault: {}", unsteady.join("; ")),
        };
        let _ = power.note(Entry::Finished {
            outcome: outcome.clone(),
        });
        return match interrupted {
            Some(sig) => {
                eprintln!("{outcome}; nothing was touched");
                Ok(signal_code(sig))
            }
            None => Err(ChaosError::Refused(format!(
                "steady state not met, nothing was touched: {}",
                unsteady.join("; ")
            ))),
        };
    }

    // ---- inject ----
    let fault_instant = Instant::now();
    moments.fault = Some(report::seconds(origin.elapsed()));
    for vm in &target.vms {
        events.push(
            origin.elapsed(),
            "vm-stop-requested",
            &vm.name,
            format!("vmid {} on {} (node {})", vm.vmid, vm.host, vm.node),
        );
    }
    show(Some(&format!(
        "fault: stopping {} VM(s) on {}",
        target.vms.len(),
        target.host
    )));
    let mut stop_errors = power.stop_all(&target.vms).await;
    events.push(
        origin.elapsed(),
        "vms-stopped",
        &target.host,
        if stop_errors.is_empty() {
            "every planned VM is stopped".to_string()
        } else {
            stop_errors.join("; ")
        },
    );
    let mut host_shut_down = false;
    if let Some(how) = target
        .host_power
        .as_ref()
        .filter(|_| stop_errors.is_empty())
    {
        events.push(
            origin.elapsed(),
            "host-shutdown-requested",
            &target.host,
            format!("through {}'s API", how.wake_via_host),
        );
        show(Some(&format!("fault: shutting host {} down", target.host)));
        host_shut_down = true;
        match power.shutdown_host(&target.host, outage).await {
            Ok(()) => events.push(
                origin.elapsed(),
                "host-offline",
                &target.host,
                "the cluster sees the host offline",
            ),
            Err(err) => stop_errors.push(err),
        }
    }

    // ---- outage ----
    let deadline = fault_instant + outage;
    let restore_reason = if !stop_errors.is_empty() {
        format!("a stop failed: {}", stop_errors.join("; "))
    } else {
        show(Some(&format!(
            "outage: {} down until the deadline ({:.0}s)",
            target.host,
            outage.as_secs_f64()
        )));
        loop {
            if let Some(sig) = signals
                .sleep_until((Instant::now() + interval).min(deadline))
                .await
            {
                interrupted = Some(sig);
                break format!("{} received", signal_name(sig));
            }
            show(None);
            if Instant::now() >= deadline {
                break "the outage deadline was reached".to_string();
            }
            if let Some(over) = over_budget(&probes, &lives) {
                break format!("a probe broke its budget: {over}");
            }
        }
    };
    progress.line(&format!("restoring: {restore_reason}"));

    // ---- restore ----
    moments.restore = Some(report::seconds(origin.elapsed()));
    events.push(
        origin.elapsed(),
        "vm-start-requested",
        &target.host,
        restore_reason.clone(),
    );
    let mut start_errors = Vec::new();
    if let Some(how) = target.host_power.as_ref().filter(|_| host_shut_down) {
        show(Some(&format!(
            "restore: waking host {} through {}",
            target.host, how.wake_via_host
        )));
        events.push(
            origin.elapsed(),
            "host-wake-requested",
            &target.host,
            format!("wake-on-LAN {} sent by {}", how.mac, how.wake_via_host),
        );
        match power
            .wake_host(&target.host, &how.wake_via_host, recovery_timeout)
            .await
        {
            Ok(()) => events.push(
                origin.elapsed(),
                "host-online",
                &target.host,
                "the cluster sees the host online",
            ),
            Err(err) => start_errors.push(err),
        }
    }
    show(Some(&format!(
        "restore: starting {} VM(s) on {}",
        target.vms.len(),
        target.host
    )));
    if start_errors.is_empty() {
        start_errors = power.start_all(&target.vms).await;
    }
    if start_errors.is_empty() {
        moments.running_again = Some(report::seconds(origin.elapsed()));
        events.push(
            origin.elapsed(),
            "vms-running",
            &target.host,
            "every planned VM runs again",
        );
        let _ = power.note(Entry::Restored);
    } else {
        events.push(
            origin.elapsed(),
            "restore-failed",
            &target.host,
            start_errors.join("; "),
        );
    }

    // ---- recovery ----
    let controller_checks = recovery::controller_checks(config);
    let recovery_started = Instant::now();
    let recovery_deadline = recovery_started + recovery_timeout;
    let poll = (interval * 5).clamp(Duration::from_millis(500), Duration::from_secs(5));
    let mut outstanding = vec!["recovery was not checked".to_string()];
    if start_errors.is_empty() {
        show(Some(
            "recovery: waiting for nodes, etcd, volumes and controllers",
        ));
        loop {
            let fresh = collect::live(config, env).await;
            outstanding = recovery::outstanding(env, &fresh, &controller_checks);
            show(None);
            if outstanding.is_empty() {
                moments.recovered = Some(report::seconds(origin.elapsed()));
                events.push(origin.elapsed(), "recovered", &env.name, "");
                break;
            }
            if Instant::now() >= recovery_deadline {
                break;
            }
            if let Some(sig) = signals
                .sleep_until((Instant::now() + poll).min(recovery_deadline))
                .await
            {
                interrupted.get_or_insert(sig);
                outstanding.push(format!("{} received while waiting", signal_name(sig)));
                break;
            }
        }
    }
    let recovery_time = recovery_started.elapsed();
    // A few more samples after recovery show the probes settled (short, even after a signal).
    tokio::time::sleep(interval * 2).await;

    // ---- verdicts ----
    let _ = stop_tx.send(true);
    let mut samples: Vec<Vec<Sample>> = Vec::new();
    for handle in samplers {
        samples.push(handle.await.unwrap_or_default());
    }
    let _ = watcher.await;
    if let Some(vip) = vip_watcher {
        let _ = vip.await;
    }
    progress.finish();
    leader_events(&leaders, &state, origin, &events);
    let observed = origin.elapsed();
    let outcomes: Vec<ProbeOutcome> = probes
        .iter()
        .zip(&samples)
        .map(|(p, s)| judge(&p.name, s, p.budget))
        .collect();
    let mut trials: Vec<TrialResult> = probes
        .iter()
        .zip(&outcomes)
        .map(|(p, o)| TrialResult {
            name: format!("gate4::{}::chaos::{}", env.name, p.name),
            gate: 4,
            kind: "chaos-probe",
            instance: Some(p.name.clone()),
            finding: o.finding.clone(),
            duration: observed,
        })
        .collect();
    let recovery_finding = if !start_errors.is_empty() {
        Finding::error(format!(
            "the VMs could not all be started: run `gates recover {}`",
            env.name
        ))
        .with_evidence(start_errors.clone())
    } else if outstanding.is_empty() {
        Finding::pass(format!(
            "everything is back {:.1}s after the VMs were started (timeout {:.0}s): nodes Ready, etcd healthy, volumes healthy, {} controllers with two ready replicas on distinct hosts",
            recovery_time.as_secs_f64(),
            recovery_timeout.as_secs_f64(),
            controller_checks.len()
        ))
    } else {
        Finding::fail(format!(
            "not recovered within {:.1}s of the VMs starting (timeout {:.0}s)",
            recovery_time.as_secs_f64(),
            recovery_timeout.as_secs_f64()
        ))
        .with_evidence(outstanding.clone())
    };
    trials.push(TrialResult {
        name: format!("gate4::{}::chaos::recovery", env.name),
        gate: 4,
        kind: "chaos-recovery",
        instance: Some("recovery".into()),
        finding: recovery_finding,
        duration: recovery_time,
    });
    let issued = power.issued();
    let whole_host = target.host_power.as_ref().map(|_| target.host.as_str());
    let beyond = power::beyond_plan(&target.vms, whole_host, &issued);
    let actions: Vec<String> = issued
        .iter()
        .map(|a| match a.vmid {
            Some(vmid) => format!("{} VM {vmid} on {}: {}", a.action, a.host, a.result),
            None => format!("{} of host {}: {}", a.action, a.host, a.result),
        })
        .collect();
    let manual = if beyond.is_empty() {
        Finding::pass(format!(
            "the harness made {} power action(s), exactly the plan's stops{} and the starts that undid them; nothing else was written",
            issued.len(),
            if whole_host.is_some() { ", the host's shutdown and wake" } else { "" },
        ))
        .with_evidence(actions)
    } else {
        Finding::fail("the harness wrote beyond its plan")
            .with_evidence(beyond.into_iter().chain(actions).collect::<Vec<_>>())
    };
    trials.push(TrialResult {
        name: format!("gate4::{}::chaos::no-manual-work", env.name),
        gate: 4,
        kind: "chaos-no-manual-work",
        instance: Some("no-manual-work".into()),
        finding: manual,
        duration: Duration::ZERO,
    });
    let tally = Tally::of(&trials);
    let verdict = if tally.errors > 0 {
        Verdict::Error
    } else if tally.failed > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    let outcome = match interrupted {
        Some(sig) => format!("interrupted by {}; restored", signal_name(sig)),
        None if !start_errors.is_empty() => "restore failed".to_string(),
        None => format!("completed; restored because {restore_reason}"),
    };
    let finished_at = Utc::now();
    let stem = report::stem(&args.reports, &env.name, started_at);
    let timeline_file = stem
        .with_extension("timeline.json")
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let decision = decision(config);
    let chaos_report = ChaosReport {
        environment: env.name.clone(),
        decision: decision.clone(),
        gate_title: config
            .gates
            .iter()
            .find(|g| g.number == 4)
            .map(|g| g.title.clone())
            .unwrap_or_else(|| "A host failure leaves the cluster available.".into()),
        host: target.host.clone(),
        host_choice: target.reason.clone(),
        mode: if target.whole_host {
            "whole-host"
        } else {
            "environment-vms"
        }
        .into(),
        vms: target.vms.clone(),
        untouched: target
            .bystanders
            .iter()
            .map(plan::describe_bystander)
            .collect(),
        started_at: report::timestamp(started_at),
        finished_at: report::timestamp(finished_at),
        sample_interval: report::seconds(interval),
        moments: moments.clone(),
        outcome: outcome.clone(),
        verdict,
        tally,
        trials: trials.clone(),
        probes: outcomes.clone(),
        power_actions: issued,
        handovers: events
            .all()
            .into_iter()
            .filter(|e| report::HANDOVER_KINDS.contains(&e.kind.as_str()))
            .collect(),
        timeline_file,
        prediction: predicted.as_ref().map(|h| {
            super::prediction::compare(
                h,
                &outcomes,
                &events.all(),
                moments.fault.map(Duration::from_secs_f64),
            )
        }),
    };
    let timeline = Timeline {
        environment: env.name.clone(),
        host: target.host.clone(),
        started_at: report::timestamp(started_at),
        moments,
        probes: probes
            .iter()
            .zip(samples)
            .map(|(p, s)| (p.name.clone(), s))
            .collect(),
        events: events.all(),
    };
    let _ = power.note(Entry::Finished {
        outcome: format!("{outcome}; verdict {}", verdict.as_str()),
    });
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&chaos_report).unwrap_or_default()
        ),
        Format::Pretty | Format::Terse => {
            runner::print(&libtest_args(args.format), &trials);
            print!("{}", closing_text(&chaos_report));
        }
    }
    let _ = std::io::stdout().flush();
    match report::write(&chaos_report, &timeline, &stem, args.junit.as_deref()) {
        Ok(paths) => {
            for path in paths {
                eprintln!("report: {}", path.display());
            }
        }
        Err(err) => eprintln!("error: cannot write the reports: {err}"),
    }
    if !start_errors.is_empty() {
        return Err(ChaosError::RestoreFailed(format!(
            "VMs may still be stopped: {}; run `gates recover {}`",
            start_errors.join("; "),
            env.name
        )));
    }
    Ok(match interrupted {
        Some(sig) => signal_code(sig),
        None => tally.exit_code(),
    })
}

/// etcd leader changes the etcd probe saw, named by member, onto the timeline.
fn leader_events(
    leaders: &probes::LeaderLog,
    state: &crate::state::State,
    origin: Instant,
    events: &Events,
) {
    let names: std::collections::BTreeMap<String, String> = state
        .talos
        .present()
        .map(|t| {
            t.endpoints
                .iter()
                .filter_map(|e| e.view.as_ref().ok())
                .flat_map(|v| v.members.iter())
                .map(|m| (m.id.clone(), m.hostname.clone()))
                .collect()
        })
        .unwrap_or_default();
    let name = |id: u64| {
        let hex = format!("{id:016x}");
        names.get(&hex).cloned().unwrap_or(hex)
    };
    let log = leaders.lock().map(|l| l.clone()).unwrap_or_default();
    for pair in log.windows(2) {
        let ((_, from), (at, to)) = (pair[0], pair[1]);
        events.push(
            at.saturating_duration_since(origin),
            "etcd-leader-changed",
            "etcd",
            format!("{} -> {}", name(from), name(to)),
        );
    }
}

fn libtest_args(format: Format) -> Arguments {
    Arguments {
        test_threads: Some(1),
        format: Some(match format {
            Format::Terse => FormatSetting::Terse,
            Format::Pretty | Format::Json => FormatSetting::Pretty,
        }),
        color: Some(if std::env::var_os("NO_COLOR").is_some() {
            ColorSetting::Never
        } else {
            ColorSetting::Auto
        }),
        ..Arguments::default()
    }
}

/// The decision the gates come from (`adr-007`), for the JUnit classname.
fn decision(config: &Config) -> String {
    config
        .gates
        .first()
        .and_then(|g| g.file.parent())
        .and_then(|dir| dir.file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "gates".to_string())
}

/// The plan, as printed before anything is touched.
fn plan_text(
    env: &Environment,
    spec: &ChaosSpec,
    target: &Target,
    probes: &[Probe],
    restore_by: chrono::DateTime<Utc>,
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
            let _ = writeln!(out, "    - {}", plan::describe_bystander(b));
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

/// The closing lines: host, VMs, what each probe saw, and whether everything came back.
fn closing_text(report: &ChaosReport) -> String {
    let mut out = String::new();
    let t = &report.tally;
    let _ = writeln!(
        out,
        "{} passed, {} failed, {} errors, {} skipped",
        t.passed, t.failed, t.errors, t.skipped
    );
    let vms: Vec<String> = report
        .vms
        .iter()
        .map(|v| format!("{} {}", v.vmid, v.name))
        .collect();
    let _ = writeln!(
        out,
        "Chaos on {}: {} went down ({}); {}",
        report.environment,
        report.host,
        vms.join(", "),
        report.outcome
    );
    let width = report
        .probes
        .iter()
        .map(|p| p.probe.len())
        .max()
        .unwrap_or(0);
    for probe in &report.probes {
        let state = if probe.outages.is_empty() {
            "available throughout".to_string()
        } else {
            format!(
                "down {} time(s), longest {:.1}s, total {:.1}s",
                probe.outages.len(),
                probe.longest.as_secs_f64(),
                probe.total.as_secs_f64()
            )
        };
        let _ = writeln!(
            out,
            "  {:<width$} {state} (budget {:.1}s / {:.1}s)",
            probe.probe,
            probe.budget_longest.as_secs_f64(),
            probe.budget_total.as_secs_f64()
        );
    }
    if !report.handovers.is_empty() {
        let _ = writeln!(out, "  handovers (seconds after the start):");
        for e in &report.handovers {
            let what = match e.kind.as_str() {
                "api-vip-holder-changed" => "API VIP".to_string(),
                "etcd-leader-changed" => "etcd leader".to_string(),
                _ => e.subject.clone(),
            };
            let _ = writeln!(out, "    {:>6.1}s {what}: {}", e.at.as_secs_f64(), e.detail);
        }
    }
    let word = match report.verdict {
        Verdict::Pass => "pass",
        Verdict::Fail => "FAIL",
        Verdict::Error => "ERROR",
        Verdict::Skip => "skip",
    };
    let _ = writeln!(out, "  gate 4 {word}  {}", report.gate_title);
    out
}

/// Each probe's line for the progress display, from the samples so far.
fn live_lines(probes: &[Probe], lives: &[Live]) -> Vec<ProbeLine> {
    probes
        .iter()
        .zip(lives)
        .map(|(probe, live)| {
            let samples = live.lock().map(|l| l.clone()).unwrap_or_default();
            let outcome = judge(&probe.name, &samples, probe.budget);
            let last = samples.iter().max_by_key(|s| s.at).map(|s| &s.observation);
            ProbeLine {
                name: probe.name.clone(),
                state: match last {
                    Some(Observation::Up) => "up",
                    Some(Observation::Down(_)) => "DOWN",
                    Some(Observation::Unknown(_)) => "unknown",
                    None => "waiting",
                },
                longest: outcome.longest,
                total: outcome.total,
                budget_longest: outcome.budget_longest,
                budget_total: outcome.budget_total,
            }
        })
        .collect()
}

/// The first probe whose outages so far are over its budget.
fn over_budget(probes: &[Probe], lives: &[Live]) -> Option<String> {
    probes.iter().zip(lives).find_map(|(probe, live)| {
        let samples = live.lock().map(|l| l.clone()).unwrap_or_default();
        let outcome = judge(&probe.name, &samples, probe.budget);
        (outcome.finding.verdict == Verdict::Fail).then_some(outcome.finding.summary)
    })
}

/// Probes that are down at the end of the baseline: the steady state the run needs.
fn unsteady_probes(probes: &[Probe], lives: &[Live]) -> Vec<String> {
    probes
        .iter()
        .zip(lives)
        .filter_map(|(probe, live)| {
            let samples = live.lock().map(|l| l.clone()).unwrap_or_default();
            match samples.iter().max_by_key(|s| s.at).map(|s| &s.observation) {
                Some(Observation::Down(reason)) => {
                    Some(format!("{} is down: {reason}", probe.name))
                }
                None => Some(format!("{} took no sample", probe.name)),
                _ => None,
            }
        })
        .collect()
}
