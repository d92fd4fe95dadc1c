//! The prediction as text: a table of hosts with their outcome and first reason, the worst
//! host, and the details of each host (for `gates predict`); and the lines the chaos plan shows
//! for its target host.

use super::outcome::{Fault, HostLoss, Outcome, Prediction};

/// The whole prediction for a terminal.
pub fn text(prediction: &Prediction, env: &str) -> String {
    let mut out = String::new();
    for why in &prediction.cannot_tell {
        out.push_str(&format!("cannot tell: {why}\n"));
    }
    for why in &prediction.not_survivable {
        out.push_str(&format!("not survivable: {why}\n"));
    }
    if !prediction.hosts.is_empty() {
        let mut rows = vec![[
            "host".to_string(),
            "outcome".into(),
            "nodes".into(),
            "moves".into(),
            "first reason".into(),
        ]];
        for h in &prediction.hosts {
            rows.push([
                h.host.clone(),
                h.outcome.as_str().into(),
                h.nodes.join(","),
                h.pods.len().to_string(),
                h.first_reason().unwrap_or("-").to_string(),
            ]);
        }
        out.push_str(&table(&rows));
        out.push('\n');
    }
    for h in &prediction.hosts {
        let what = match prediction.fault {
            Fault::Power => "Loss",
            Fault::Partition => "Partition",
        };
        out.push_str(&format!(
            "\n{what} of {} ({}):\n",
            h.host,
            h.outcome.as_str()
        ));
        for line in details(h) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    for note in &prediction.notes {
        out.push_str(&format!("\nnote: {note}\n"));
    }
    let survivable = prediction.hosts.iter().filter(|h| h.survivable()).count();
    let (fault, things) = match prediction.fault {
        Fault::Power => (String::new(), "host losses"),
        Fault::Partition => (" (partition)".to_string(), "host partitions"),
    };
    out.push_str(&format!(
        "\nPrediction for {env}{fault}: {survivable} of {} {things} survivable",
        prediction.hosts.len()
    ));
    if let Some(worst) = prediction.worst.as_deref().and_then(|w| prediction.host(w)) {
        out.push_str(&format!(
            "; worst: {} ({}{})",
            worst.host,
            worst.outcome.as_str(),
            worst
                .first_reason()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
    }
    out.push('\n');
    out
}

/// Reasons, etcd, ingress, controllers, moves, capacity and volumes of one host.
pub fn details(h: &HostLoss) -> Vec<String> {
    let mut lines = Vec::new();
    if !h.vms.is_empty() {
        lines.push(format!("VMs: {}", h.vms.join(", ")));
    }
    for r in &h.reasons {
        let label = match r.severity {
            Outcome::Survives => "note",
            severity => severity.as_str(),
        };
        lines.push(format!("{label}: {}", r.text));
    }
    if let Some(e) = &h.etcd {
        lines.push(format!(
            "etcd: {} of {} members left, {} needed ({}); {}",
            e.left,
            e.members,
            e.quorum,
            if e.kept { "quorum kept" } else { "quorum lost" },
            match (&e.vip_holder, e.vip_moves) {
                (Some(holder), true) => format!("the API VIP moves from {holder}"),
                (Some(holder), false) => format!("the API VIP stays on {holder}"),
                (None, _) => "the API VIP's holder is unknown".to_string(),
            }
        ));
    }
    for l in &h.l2 {
        lines.push(format!(
            "ingress {}: announcers left {}{}",
            l.service,
            if l.announcers_left.is_empty() {
                "none".to_string()
            } else {
                l.announcers_left.join(", ")
            },
            if l.holder_lost {
                format!(
                    "; lease holder {} goes",
                    l.holder.as_deref().unwrap_or_default()
                )
            } else {
                String::new()
            }
        ));
    }
    for c in &h.controllers {
        lines.push(format!(
            "controller {}: {} ready left at once, {} after rescheduling (of {})",
            c.name, c.ready_left, c.after_rescheduling, c.pods
        ));
    }
    for m in &h.pods {
        lines.push(format!("pod {}", m.describe()));
    }
    for c in &h.capacity {
        let show = |v: Option<i64>, f: &dyn Fn(i64) -> String| v.map_or("-".to_string(), f);
        let cpu = |m: i64| {
            super::cluster::Res {
                cpu_m: m,
                ..Default::default()
            }
            .cpu_text()
        };
        let mem = |b: i64| {
            super::cluster::Res {
                mem: b,
                ..Default::default()
            }
            .mem_text()
        };
        lines.push(format!(
            "capacity {} ({}): cpu requests {} usage {} of {}; memory requests {} usage {} of {}{}",
            c.node,
            c.host,
            cpu(c.cpu_requests),
            show(c.cpu_usage, &cpu),
            cpu(c.cpu_allocatable),
            mem(c.memory_requests),
            show(c.memory_usage, &mem),
            mem(c.memory_allocatable),
            if c.within_rebuild_margin {
                ""
            } else {
                " (into the rebuild margin)"
            }
        ));
    }
    for v in &h.volumes {
        lines.push(format!(
            "volume {}: {} of {} replicas left (lost on {})",
            v.volume,
            v.left,
            v.replicas,
            v.lost_on.join(", ")
        ));
    }
    lines
}

/// The lines a chaos plan shows for its target host: the outcome, the expected outages, and
/// each pod to reschedule and where.
pub fn plan_lines(h: &HostLoss) -> Vec<String> {
    let mut lines = vec![format!("prediction: {}", h.outcome.as_str())];
    for r in &h.reasons {
        let label = match r.severity {
            Outcome::Lost => "not survivable",
            Outcome::Unknown => "cannot tell",
            Outcome::Degraded => "expected",
            Outcome::Survives => "note",
        };
        lines.push(format!("  {label}: {}", r.text));
    }
    if let Some(e) = &h.etcd {
        lines.push(format!(
            "  etcd: {} of {} members left ({} needed)",
            e.left, e.members, e.quorum
        ));
    }
    if !h.pods.is_empty() {
        lines.push(format!("  pods to reschedule: {}", h.pods.len()));
        for m in &h.pods {
            lines.push(format!("    {}", m.describe()));
        }
    }
    lines
}

fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}
