//! Restore: undo the fault whatever happened. In whole-host mode the host is woken through
//! another host's API first; then every planned VM is started and awaited. The journal hears
//! `restored` only when everything runs again.

use std::time::Duration;

use super::journal::{Entry, FaultKind};
use super::power::Power;
use crate::chaos::context::Ctx;
use crate::chaos::observe::observers::Observers;
use crate::chaos::observe::outage::RestoreReason;
use crate::chaos::plan::Target;

#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    /// When the restore began (seconds on the timeline).
    pub restore: f64,
    /// When every planned VM ran again, if it did.
    pub running_again: Option<f64>,
    /// One per VM (or the host) that did not come back.
    pub start_errors: Vec<String>,
}

pub async fn restore(
    ctx: &Ctx<'_>,
    observers: &Observers<'_>,
    power: &Power,
    target: &Target,
    host_shut_down: bool,
    recovery_timeout: Duration,
    reason: &RestoreReason,
) -> Restored {
    let restore = ctx.seconds();
    ctx.event("vm-start-requested", &target.host, reason.to_string());
    let mut start_errors = Vec::new();
    if let Some(how) = target.host_power.as_ref().filter(|_| host_shut_down) {
        observers.show(
            ctx,
            Some(&format!(
                "restore: waking host {} through {}",
                target.host, how.wake_via_host
            )),
        );
        ctx.event(
            "host-wake-requested",
            &target.host,
            format!("wake-on-LAN {} sent by {}", how.mac, how.wake_via_host),
        );
        match power
            .wake_host(&target.host, &how.wake_via_host, recovery_timeout)
            .await
        {
            Ok(()) => ctx.event(
                "host-online",
                &target.host,
                "the cluster sees the host online",
            ),
            Err(err) => start_errors.push(err.to_string()),
        }
    }
    let partition = target.fault == FaultKind::Partition;
    let doing = if partition {
        "putting back the links of"
    } else {
        "starting"
    };
    observers.show(
        ctx,
        Some(&format!(
            "restore: {doing} {} VM(s) on {}",
            target.vms.len(),
            target.host
        )),
    );
    if start_errors.is_empty() {
        start_errors = if partition {
            power.restore_links(&target.vms, recovery_timeout).await
        } else {
            power.start_all(&target.vms, recovery_timeout).await
        };
    }
    let mut running_again = None;
    if start_errors.is_empty() {
        running_again = Some(ctx.seconds());
        let detail = if partition {
            "every planned VM is back on the network"
        } else {
            "every planned VM runs again"
        };
        ctx.event("vms-running", &target.host, detail);
        let _ = power.note(Entry::Restored);
    } else {
        ctx.event("restore-failed", &target.host, start_errors.join("; "));
    }
    Restored {
        restore,
        running_again,
        start_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::act::test_power::{ctx_parts, target, timings, unreachable_power};
    use crate::chaos::journal::{self, Entry};

    #[tokio::test]
    async fn a_start_that_fails_is_reported_and_the_journal_still_owes_the_vm() {
        let parts = ctx_parts();
        let ctx = parts.ctx();
        let (power, path, _dir) = unreachable_power();
        let target = target();
        power
            .note(Entry::StopRequested {
                vmid: 201,
                host: "pve2".into(),
            })
            .unwrap();
        let observers = Observers::start(&ctx, &[], &timings(), None, None, &Default::default());
        let restored = restore(
            &ctx,
            &observers,
            &power,
            &target,
            false,
            Duration::from_secs(2),
            &RestoreReason::Deadline,
        )
        .await;
        observers.stop().await;
        assert_eq!(restored.running_again, None);
        assert_eq!(restored.start_errors.len(), 2);
        let records = journal::read(&path).unwrap();
        assert!(!records.iter().any(|r| r.entry == Entry::Restored));
        assert_eq!(journal::pending_restore(&records).len(), 1);
        let lines = parts.recorder.lines();
        assert!(
            lines.contains(
                &"event vm-start-requested pve2 the outage deadline was reached".to_string()
            ),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("event restore-failed pve2")),
            "{lines:?}"
        );
    }
}
