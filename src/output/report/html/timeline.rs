//! The chaos timeline as an inline SVG: one lane per probe with its outage and unknown
//! intervals over the span it was sampled, one lane per kind of event (the harness's power
//! actions, nodes, handovers, replaced pods, the API watcher), and the fault, restore,
//! running-again and recovered marks across all lanes. Every interval and event carries a
//! `<title>` (a tooltip on screen) and `data-` attributes with its seconds, so the picture can
//! be checked by machine in a browser as well as read by eye.

use std::fmt::Write as _;

use super::escape;
use gates_core::record::chaos::ChaosRecord;
use gates_core::record::event::Event;
use gates_core::record::probe::ProbeOutcome;
use gates_core::record::seconds::rounded;
use gates_core::record::timeline::{Interval, Sample, Timeline};

const WIDTH: f64 = 1100.0;
const LEFT: f64 = 262.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 46.0;
const PROBE_LANE: f64 = 26.0;
const EVENT_LANE: f64 = 22.0;
const GAP: f64 = 8.0;
const AXIS: f64 = 26.0;

/// The event lanes, in the order drawn, with the label each lane shows.
pub const EVENT_LANES: [(&str, &str); 5] = [
    ("harness", "harness"),
    ("nodes", "nodes"),
    ("handovers", "handovers"),
    ("pods", "pods replaced"),
    ("other", "API watcher, other"),
];

/// Which event lane a timeline event belongs to.
pub fn lane_of(kind: &str) -> &'static str {
    match kind {
        "vm-stop-requested"
        | "vm-start-requested"
        | "vms-stopped"
        | "vms-running"
        | "host-shutdown-requested"
        | "host-wake-requested"
        | "host-offline"
        | "host-online"
        | "restore-failed"
        | "recovered" => "harness",
        "node-not-ready" | "node-ready" => "nodes",
        "api-vip-holder-changed" | "lease-holder-changed" | "etcd-leader-changed" => "handovers",
        "pod-removed" | "pod-created" => "pods",
        _ => "other",
    }
}

/// Maps seconds on the run's timeline to x in the drawing.
struct Scale {
    end: f64,
}

impl Scale {
    fn x(&self, seconds: f64) -> f64 {
        LEFT + (seconds.clamp(0.0, self.end) / self.end) * (WIDTH - LEFT - RIGHT)
    }
}

/// The last moment anything happened, so the drawing spans the whole run.
fn end_of(report: &ChaosRecord, timeline: &Timeline) -> f64 {
    let m = &report.moments;
    let moments = [m.fault, m.restore, m.running_again, m.recovered];
    let samples = timeline.probes.values().flatten().map(|s| rounded(s.at));
    let events = timeline
        .events
        .iter()
        .chain(&report.handovers)
        .map(|e| rounded(e.at));
    let intervals = report
        .probes
        .iter()
        .flat_map(|p| p.outages.iter().chain(&p.unknown))
        .map(|i| rounded(i.end));
    moments
        .into_iter()
        .flatten()
        .chain(samples)
        .chain(events)
        .chain(intervals)
        .fold(1.0_f64, f64::max)
}

/// A tick step of 1, 2 or 5 times a power of ten giving at most about ten ticks.
pub fn tick_step(end: f64) -> f64 {
    let raw = (end / 10.0).max(0.001);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// Every event to draw: the timeline's, or the report's handovers when the timeline file
/// is missing.
fn events<'a>(report: &'a ChaosRecord, timeline: &'a Timeline) -> Vec<&'a Event> {
    if timeline.events.is_empty() {
        report.handovers.iter().collect()
    } else {
        timeline.events.iter().collect()
    }
}

pub fn svg(report: &ChaosRecord, timeline: &Timeline) -> String {
    let scale = Scale {
        end: end_of(report, timeline),
    };
    let events = events(report, timeline);
    let event_lanes: Vec<(&str, &str)> = EVENT_LANES
        .into_iter()
        .filter(|(lane, _)| events.iter().any(|e| lane_of(&e.kind) == *lane))
        .collect();
    let handovers: Vec<&Event> = events
        .iter()
        .copied()
        .filter(|e| lane_of(&e.kind) == "handovers")
        .collect();
    let label_rows = label_rows(&handovers, &scale);
    let rows = label_rows.iter().copied().max().map_or(0, |r| r + 1);
    let lane_height = |lane: &str| {
        if lane == "handovers" {
            EVENT_LANE + LABEL_ROW * rows as f64
        } else {
            EVENT_LANE
        }
    };
    let height = TOP
        + report.probes.len() as f64 * (PROBE_LANE + GAP)
        + event_lanes
            .iter()
            .map(|(lane, _)| lane_height(lane) + GAP)
            .sum::<f64>()
        + AXIS;
    let bottom = height - AXIS;

    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height}\" \
         role=\"img\" aria-labelledby=\"timeline-title timeline-desc\" data-end=\"{:.3}\">\
         <title id=\"timeline-title\">Timeline of the chaos run on {}</title>\
         <desc id=\"timeline-desc\">{}</desc>\
         <defs><pattern id=\"unknown-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
         patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#e6e6e6\"/>\
         <line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#767676\" stroke-width=\"2.5\"/></pattern></defs>",
        scale.end,
        escape(&report.host),
        escape(&describe(report)),
    );

    grid(&mut out, &scale, bottom);
    let mut y = TOP;
    for probe in &report.probes {
        probe_lane(
            &mut out,
            probe,
            timeline.probes.get(&probe.probe),
            &scale,
            y,
        );
        y += PROBE_LANE + GAP;
    }
    for (lane, label) in &event_lanes {
        let lane_h = lane_height(lane);
        let lane = EventLane {
            lane,
            label,
            y,
            label_rows: &label_rows,
        };
        lane.draw(&mut out, &events, &scale);
        y += lane_h + GAP;
    }
    marks(&mut out, report, &scale, bottom);
    out.push_str("</svg>");
    out
}

/// The grid and the time axis.
fn grid(out: &mut String, scale: &Scale, bottom: f64) {
    let step = tick_step(scale.end);
    let mut t = 0.0;
    while t <= scale.end + 1e-9 {
        let x = scale.x(t);
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}s</text>",
            bottom + 16.0,
            trim(t)
        );
        t += step;
    }
}

/// One probe's lane: when it was sampled, and its unknown and down intervals.
fn probe_lane(
    out: &mut String,
    probe: &ProbeOutcome,
    samples: Option<&Vec<Sample>>,
    scale: &Scale,
    y: f64,
) {
    let _ = write!(
        out,
        "<g class=\"lane probe\" data-probe=\"{}\" data-verdict=\"{}\">\
         <text class=\"lane-label\" x=\"8\" y=\"{:.1}\">{}</text>",
        escape(&probe.probe),
        escape(probe.finding.verdict.as_str()),
        y + PROBE_LANE / 2.0 + 4.0,
        escape(&probe.probe)
    );
    let sampled = samples.and_then(|s| {
        let first = s.iter().map(|s| rounded(s.at)).reduce(f64::min)?;
        let last = s.iter().map(|s| rounded(s.at)).reduce(f64::max)?;
        Some((first, last))
    });
    if let Some((first, last)) = sampled {
        let _ = write!(
            out,
            "<rect class=\"sampled\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{PROBE_LANE}\" \
             data-start=\"{first:.3}\" data-end=\"{last:.3}\"><title>{} sampled from {}s to {}s ({} samples)</title></rect>",
            scale.x(first),
            (scale.x(last) - scale.x(first)).max(1.0),
            escape(&probe.probe),
            trim(first),
            trim(last),
            samples.map_or(0, Vec::len)
        );
    }
    for (class, word, intervals) in [
        ("unknown", "unknown", &probe.unknown),
        ("outage", "down", &probe.outages),
    ] {
        for interval in intervals {
            let (start, end) = (rounded(interval.start), rounded(interval.end));
            let x = scale.x(start);
            // A one-sample outage still shows.
            let width = (scale.x(end) - x).max(2.0);
            let _ = write!(
                out,
                "<rect class=\"{class}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"{:.1}\" \
                 data-start=\"{:.3}\" data-end=\"{:.3}\"><title>{} {word} from {}s to {}s ({}s)</title></rect>",
                y + 3.0,
                PROBE_LANE - 6.0,
                start,
                end,
                escape(&probe.probe),
                trim(start),
                trim(end),
                trim(length(interval)),
            );
        }
    }
    out.push_str("</g>");
}

/// One lane of events (harness actions, nodes, handovers, replaced pods): a marker each,
/// handovers with their labels in rows that do not overlap.
struct EventLane<'a> {
    lane: &'a str,
    label: &'a str,
    y: f64,
    label_rows: &'a [usize],
}

impl EventLane<'_> {
    fn draw(&self, out: &mut String, events: &[&Event], scale: &Scale) {
        let (lane, label, y, label_rows) = (self.lane, self.label, self.y, self.label_rows);
        let _ = write!(
            out,
            "<g class=\"lane events\" data-lane=\"{lane}\">\
             <text class=\"lane-label\" x=\"8\" y=\"{:.1}\">{}</text>\
             <line class=\"grid\" x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\"/>",
            y + EVENT_LANE / 2.0 + 4.0,
            escape(label),
            y + EVENT_LANE / 2.0,
            WIDTH - RIGHT,
            y + EVENT_LANE / 2.0,
        );
        for (i, event) in events
            .iter()
            .filter(|e| lane_of(&e.kind) == lane)
            .enumerate()
        {
            let at = rounded(event.at);
            let x = scale.x(at);
            let cy = y + EVENT_LANE / 2.0;
            let _ = write!(
                out,
                "<circle class=\"event {lane}\" cx=\"{x:.1}\" cy=\"{cy:.1}\" r=\"5\" data-at=\"{:.3}\" \
                 data-kind=\"{}\"><title>{}s {} {}{}</title></circle>",
                at,
                escape(&event.kind),
                trim(at),
                escape(&event.kind),
                escape(&event.subject),
                if event.detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", escape(&event.detail))
                },
            );
            if lane == "handovers" {
                // Each label on the first row below the line where it does not overlap the
                // one before it, joined to its marker by a thin line.
                let row = label_rows.get(i).copied().unwrap_or(0) as f64;
                let ty = cy + EVENT_LANE / 2.0 + LABEL_ROW * row + 9.0;
                let _ = write!(
                    out,
                    "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
                     <text class=\"handover\" x=\"{:.1}\" y=\"{ty:.1}\">{}</text>",
                    cy + 5.0,
                    ty - 3.0,
                    x + 3.0,
                    escape(&handover_label(event))
                );
            }
        }
        out.push_str("</g>");
    }
}

/// The fault, restore, running-again and recovered marks across every lane, labels staggered
/// in two rows.
fn marks(out: &mut String, report: &ChaosRecord, scale: &Scale, bottom: f64) {
    let m = &report.moments;
    let marks = [
        ("fault", "fault", m.fault),
        ("restore", "restore", m.restore),
        ("running-again", "VMs running", m.running_again),
        ("recovered", "recovered", m.recovered),
    ];
    for (row, (class, label, at)) in marks
        .into_iter()
        .filter_map(|(c, l, at)| at.map(|at| (c, l, at)))
        .enumerate()
    {
        let x = scale.x(at);
        let label_y = if row % 2 == 0 { 14.0 } else { 30.0 };
        // Near the right edge the label ends at its mark instead of running off the picture.
        let anchor = if x > WIDTH - RIGHT - 60.0 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            out,
            "<g class=\"mark {class}\" data-at=\"{at:.3}\"><line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\"/>\
             <text x=\"{x:.1}\" y=\"{label_y}\" text-anchor=\"{anchor}\">{label} {}s</text></g>",
            label_y + 4.0,
            trim(at)
        );
    }
}

/// Height of one row of handover labels.
const LABEL_ROW: f64 = 14.0;

/// For each handover label in time order, the first row whose previous label ends before it
/// starts (labels are about 6.5 units per character at 11px).
fn label_rows(handovers: &[&Event], scale: &Scale) -> Vec<usize> {
    let mut row_ends: Vec<f64> = Vec::new();
    handovers
        .iter()
        .map(|event| {
            let start = scale.x(rounded(event.at)) + 3.0;
            let end = start + 6.5 * handover_label(event).chars().count() as f64;
            match row_ends.iter().position(|&e| e + 8.0 < start) {
                Some(row) => {
                    row_ends[row] = end;
                    row
                }
                None => {
                    row_ends.push(end);
                    row_ends.len() - 1
                }
            }
        })
        .collect()
}

/// `VIP talos-cp-01 -> talos-cp-02`: what a handover label says in the picture.
fn handover_label(event: &Event) -> String {
    let what = match event.kind.as_str() {
        "api-vip-holder-changed" => "VIP",
        "lease-holder-changed" => "lease",
        "etcd-leader-changed" => "etcd leader",
        other => other,
    };
    if event.detail.is_empty() {
        format!("{what} {}", event.subject)
    } else {
        format!("{what} {}", event.detail)
    }
}

/// The text alternative of the picture: each probe's outages in words.
fn describe(report: &ChaosRecord) -> String {
    let probes: Vec<String> = report
        .probes
        .iter()
        .map(|p| {
            if p.outages.is_empty() {
                format!("{} available throughout", p.probe)
            } else {
                format!(
                    "{} down {} time(s), longest {}s, total {}s",
                    p.probe,
                    p.outages.len(),
                    trim(rounded(p.longest)),
                    trim(rounded(p.total))
                )
            }
        })
        .collect();
    probes.join("; ")
}

/// An interval's length in seconds, from its ends as the file holds them.
fn length(interval: &Interval) -> f64 {
    (rounded(interval.end) - rounded(interval.start)).max(0.0)
}

/// Seconds with at most one decimal, without a trailing `.0`.
pub fn trim(seconds: f64) -> String {
    let text = format!("{seconds:.1}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(tick_step(9.0), 1.0);
        assert_eq!(tick_step(15.0), 2.0);
        assert_eq!(tick_step(360.0), 50.0);
        assert_eq!(tick_step(1000.0), 100.0);
    }

    #[test]
    fn events_fall_into_their_lanes_and_unknown_kinds_into_other() {
        assert_eq!(lane_of("vm-stop-requested"), "harness");
        assert_eq!(lane_of("node-not-ready"), "nodes");
        assert_eq!(lane_of("etcd-leader-changed"), "handovers");
        assert_eq!(lane_of("pod-created"), "pods");
        assert_eq!(lane_of("something-new"), "other");
    }

    #[test]
    fn seconds_print_without_a_trailing_zero() {
        assert_eq!(trim(12.0), "12");
        assert_eq!(trim(12.25), "12.2");
    }
}
