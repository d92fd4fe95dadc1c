//! Inject: the fault. Every planned VM is hard-stopped at once (as a host losing power does);
//! in whole-host mode the host is then shut down. Each step is on the timeline.

use std::time::Duration;

use tokio::time::Instant;

use super::power::Power;
use crate::chaos::context::Ctx;
use crate::chaos::journal::FaultKind;
use crate::chaos::observe::observers::Observers;
use crate::chaos::plan::Target;

#[derive(Debug, Clone, PartialEq)]
pub struct Injected {
    /// When the first stop was sent.
    pub at: Instant,
    /// The same, in seconds on the timeline.
    pub fault: f64,
    /// One per VM (or the host) that did not go down.
    pub stop_errors: Vec<String>,
    /// Whether the host's shutdown was asked for (and so its wake is owed).
    pub host_shut_down: bool,
}

pub async fn inject(
    ctx: &Ctx<'_>,
    observers: &Observers<'_>,
    power: &Power,
    target: &Target,
    outage: Duration,
) -> Injected {
    if target.fault == FaultKind::Partition {
        return partition(ctx, observers, power, target).await;
    }
    let at = ctx.clock.now();
    let fault = ctx.seconds();
    for vm in &target.vms {
        ctx.event(
            "vm-stop-requested",
            &vm.name,
            format!("vmid {} on {} (node {})", vm.vmid, vm.host, vm.node),
        );
    }
    observers.show(
        ctx,
        Some(&format!(
            "fault: stopping {} VM(s) on {}",
            target.vms.len(),
            target.host
        )),
    );
    let mut stop_errors = power.stop_all(&target.vms).await;
    ctx.event(
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
        ctx.event(
            "host-shutdown-requested",
            &target.host,
            format!("through {}'s API", how.wake_via_host),
        );
        observers.show(
            ctx,
            Some(&format!("fault: shutting host {} down", target.host)),
        );
        host_shut_down = true;
        match power.shutdown_host(&target.host, outage).await {
            Ok(()) => ctx.event(
                "host-offline",
                &target.host,
                "the cluster sees the host offline",
            ),
            Err(err) => stop_errors.push(err.to_string()),
        }
    }
    Injected {
        at,
        fault,
        stop_errors,
        host_shut_down,
    }
}

/// A partition: every planned device's link pulled at once; the VMs keep running.
async fn partition(
    ctx: &Ctx<'_>,
    observers: &Observers<'_>,
    power: &Power,
    target: &Target,
) -> Injected {
    let at = ctx.clock.now();
    let fault = ctx.seconds();
    for vm in &target.vms {
        ctx.event(
            "link-down-requested",
            &vm.name,
            format!(
                "vmid {} on {} (node {}): {}",
                vm.vmid,
                vm.host,
                vm.node,
                vm.nets.join(", ")
            ),
        );
    }
    observers.show(
        ctx,
        Some(&format!(
            "fault: pulling the links of {} VM(s) on {}",
            target.vms.len(),
            target.host
        )),
    );
    let stop_errors = power.pull_links(&target.vms).await;
    ctx.event(
        "links-down",
        &target.host,
        if stop_errors.is_empty() {
            "every planned VM runs cut off the network".to_string()
        } else {
            stop_errors.join("; ")
        },
    );
    Injected {
        at,
        fault,
        stop_errors,
        host_shut_down: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::act::test_power::{ctx_parts, unreachable_power};
    use crate::chaos::journal::{self, Entry};

    #[tokio::test]
    async fn every_stop_is_journaled_before_it_is_sent_and_a_failed_stop_is_reported() {
        let parts = ctx_parts();
        let ctx = parts.ctx();
        let (power, path, _dir) = unreachable_power();
        let target = crate::chaos::act::test_power::target();
        let observers = Observers::start(
            &ctx,
            &[],
            &crate::chaos::act::test_power::timings(),
            None,
            None,
            &Default::default(),
        );
        let injected = inject(&ctx, &observers, &power, &target, Duration::from_secs(60)).await;
        observers.stop().await;
        assert_eq!(injected.stop_errors.len(), 2, "{:?}", injected.stop_errors);
        assert!(!injected.host_shut_down);
        let records = journal::read(&path).unwrap();
        let requested = records
            .iter()
            .filter(|r| matches!(r.entry, Entry::StopRequested { .. }))
            .count();
        assert_eq!(requested, 2);
        assert_eq!(journal::pending_restore(&records).len(), 2, "still owed");
        let lines = parts.recorder.lines();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("event vm-stop-requested talos-lab-cp-02 vmid 201")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("event vms-stopped pve2 stop 201")),
            "{lines:?}"
        );
    }
}
