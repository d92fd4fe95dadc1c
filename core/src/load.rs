//! Load measured over a window (`capacity.basis: prometheus`): from the values a range query
//! gave for one node, the statistic gate 5 judges on (a quantile or the maximum), the peak and
//! when it happened, and the steps of the window that have no value (gaps). Pure: the
//! collector reads Prometheus and hands the values in; nothing here reads a clock.
//!
//! A quantile is computed as PromQL's `quantile_over_time` computes it (rank φ·(n−1), the
//! two neighbouring values weighted), so the value can be checked against Prometheus itself.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use serde::{Serialize, Serializer};

use crate::config::LoadStatistic;

/// The evaluation steps of a range query: `start`, `start + step`, … up to `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Milliseconds since the epoch.
    pub start_ms: i64,
    pub end_ms: i64,
    pub step_ms: i64,
}

impl Window {
    /// How many steps the window has (Prometheus evaluates at `start` and every step up to
    /// `end`); 0 for a window that ends before it starts or a step that is not positive.
    pub fn steps(&self) -> usize {
        if self.step_ms <= 0 || self.end_ms < self.start_ms {
            return 0;
        }
        ((self.end_ms - self.start_ms) / self.step_ms + 1) as usize
    }

    /// The time of step `k`.
    pub fn at(&self, k: usize) -> DateTime<Utc> {
        time(self.start_ms + k as i64 * self.step_ms)
    }

    /// The step a sample's time falls on, if it is one of the window's.
    fn step_of(&self, at_ms: i64) -> Option<usize> {
        if self.step_ms <= 0 {
            return None;
        }
        let offset = at_ms.saturating_sub(self.start_ms);
        let k = (offset as f64 / self.step_ms as f64).round();
        (k >= 0.0 && (k as usize) < self.steps()).then_some(k as usize)
    }
}

/// A time in milliseconds as UTC (the epoch for one out of chrono's range).
pub fn time(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::UNIX_EPOCH)
}

/// A run of consecutive steps without a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// The first and the last step without a value.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub steps: usize,
}

/// One series of one node over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    /// The statistic: the quantile, or the maximum.
    pub value: f64,
    pub peak: f64,
    pub peak_at: DateTime<Utc>,
    /// Steps with a value, and steps in the window.
    pub samples: usize,
    pub steps: usize,
    /// The runs of steps without a value, in time order.
    pub gaps: Vec<Gap>,
}

impl Measured {
    /// The share of the window's steps without a value.
    pub fn gap_share(&self) -> f64 {
        if self.steps == 0 {
            1.0
        } else {
            (self.steps - self.samples) as f64 / self.steps as f64
        }
    }
}

/// The statistic of `values` (each `(milliseconds, value)`) over `window`, its peak and its
/// gaps. A value that is not finite (`NaN`, `±Inf`) or off the window counts as missing.
/// `None` when not one step has a value.
pub fn measure(
    window: &Window,
    values: &[(i64, f64)],
    statistic: LoadStatistic,
) -> Option<Measured> {
    let steps = window.steps();
    let mut at_step: Vec<Option<f64>> = vec![None; steps];
    for &(at_ms, value) in values {
        if let (Some(k), true) = (window.step_of(at_ms), value.is_finite()) {
            at_step[k] = Some(value);
        }
    }
    let mut present: Vec<f64> = at_step.iter().flatten().copied().collect();
    if present.is_empty() {
        return None;
    }
    let (peak_step, peak) = at_step
        .iter()
        .enumerate()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .fold((0, f64::NEG_INFINITY), |best, (k, v)| {
            if v > best.1 { (k, v) } else { best }
        });
    let mut gaps = Vec::new();
    let mut run: Option<usize> = None;
    for (k, value) in at_step.iter().enumerate().chain([(steps, &Some(0.0))]) {
        match (value, run) {
            (None, None) => run = Some(k),
            (Some(_), Some(first)) => {
                gaps.push(Gap {
                    from: window.at(first),
                    to: window.at(k - 1),
                    steps: k - first,
                });
                run = None;
            }
            _ => {}
        }
    }
    present.sort_by(f64::total_cmp);
    let value = match statistic {
        LoadStatistic::Max => peak,
        LoadStatistic::Quantile(q) => quantile(q, &present),
    };
    Some(Measured {
        value,
        peak,
        peak_at: window.at(peak_step),
        samples: present.len(),
        steps,
        gaps,
    })
}

/// The `q` quantile of ascending `sorted` values, as PromQL's `quantile` computes it; `NaN`
/// for no values.
pub fn quantile(q: f64, sorted: &[f64]) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return f64::NAN;
    };
    let rank = q.clamp(0.0, 1.0) * last as f64;
    let lower = rank.floor() as usize;
    let upper = (lower + 1).min(last);
    let weight = rank - rank.floor();
    if weight == 0.0 {
        sorted[lower]
    } else {
        sorted[lower] * (1.0 - weight) + sorted[upper] * weight
    }
}

/// What Prometheus said of each node over the window (`state.node_load`).
#[derive(Debug, Clone, Serialize)]
pub struct NodeLoad {
    pub url: String,
    pub window: Window,
    #[serde(serialize_with = "as_text")]
    pub statistic: LoadStatistic,
    pub max_gap_share: f64,
    pub node_label: String,
    /// By the value of `node_label`.
    pub nodes: BTreeMap<String, NodeMeasure>,
}

/// CPU (cores) and memory (bytes) of one node; `None` where its query gave no value.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeMeasure {
    pub cpu: Option<Measured>,
    pub memory: Option<Measured>,
}

fn as_text<S: Serializer>(statistic: &LoadStatistic, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(statistic)
}

/// The settings' names, as the environment file spells them.
pub const QUERY_KEYS: [(&str, &str); 2] = [
    ("cpu", "capacity.prometheus.queries.cpu"),
    ("memory", "capacity.prometheus.queries.memory"),
];

/// Why a node's measured load cannot stand for its load: each query that gave no series for
/// it or left too much of the window empty.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct LoadUnknown(pub Vec<LoadProblem>);

/// One query's problem with one node.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadProblem {
    #[error(
        "{key} gave no series with {label}=\"{node}\" over the window (check that the query keeps that label, `sum by ({label})`, and that the node is scraped)"
    )]
    NoSeries {
        key: &'static str,
        label: String,
        node: String,
    },
    #[error(
        "{key} lacks {missing} of {steps} steps ({percent:.1}%), more than capacity.prometheus.max_gap_share {allowed} allows: {gaps}"
    )]
    Gaps {
        key: &'static str,
        missing: u64,
        steps: u64,
        percent: f64,
        allowed: f64,
        /// The gaps in words, with their times.
        gaps: String,
    },
}

impl NodeLoad {
    /// The node's CPU and memory over the window, or why they cannot stand for its load: a
    /// query gave no series for it, or more of the window's steps lack a value than
    /// `max_gap_share` allows.
    pub fn of(&self, node: &str) -> Result<(&Measured, &Measured), LoadUnknown> {
        let measure = self.nodes.get(node);
        let mut problems = Vec::new();
        let mut found = Vec::new();
        for (resource, key) in QUERY_KEYS {
            let series = measure.and_then(|m| match resource {
                "cpu" => m.cpu.as_ref(),
                _ => m.memory.as_ref(),
            });
            match series {
                None => problems.push(LoadProblem::NoSeries {
                    key,
                    label: self.node_label.clone(),
                    node: node.to_string(),
                }),
                Some(m) if m.gap_share() > self.max_gap_share => problems.push(LoadProblem::Gaps {
                    key,
                    missing: (m.steps - m.samples) as u64,
                    steps: m.steps as u64,
                    percent: m.gap_share() * 100.0,
                    allowed: self.max_gap_share,
                    gaps: describe_gaps(&m.gaps),
                }),
                Some(m) => found.push(m),
            }
        }
        match (problems.is_empty(), found.as_slice()) {
            (true, [cpu, memory]) => Ok((cpu, memory)),
            _ => Err(LoadUnknown(problems)),
        }
    }
}

/// The longest gaps, at most three, in time order: `2026-12-01 00:00 to 20:00 UTC (241 steps)`.
pub fn describe_gaps(gaps: &[Gap]) -> String {
    let mut longest: Vec<&Gap> = gaps.iter().collect();
    longest.sort_by(|a, b| b.steps.cmp(&a.steps).then(a.from.cmp(&b.from)));
    longest.truncate(3);
    longest.sort_by_key(|g| g.from);
    let mut text: Vec<String> = longest
        .iter()
        .map(|g| {
            format!(
                "no value from {} to {} ({} step{})",
                g.from.format("%Y-%m-%d %H:%M"),
                g.to.format("%Y-%m-%d %H:%M UTC"),
                g.steps,
                if g.steps == 1 { "" } else { "s" }
            )
        })
        .collect();
    if gaps.len() > longest.len() {
        text.push(format!("and {} shorter gap(s)", gaps.len() - longest.len()));
    }
    text.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn window(steps: i64) -> Window {
        Window {
            start_ms: 1_000 * MIN,
            end_ms: 1_000 * MIN + (steps - 1) * 5 * MIN,
            step_ms: 5 * MIN,
        }
    }

    fn series(values: &[f64]) -> Vec<(i64, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(k, v)| (1_000 * MIN + k as i64 * 5 * MIN, *v))
            .collect()
    }

    #[test]
    fn a_quantile_weighs_the_two_neighbouring_values_as_promql_does() {
        // φ = 0.95 over 1..=10: rank 8.55, so 9 + 0.55 × (10 − 9).
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        assert!((quantile(0.95, &values) - 9.55).abs() < 1e-12);
        assert_eq!(quantile(0.5, &[1.0, 2.0, 3.0]), 2.0);
        assert_eq!(quantile(1.0, &[1.0, 2.0, 3.0]), 3.0);
        assert!(quantile(0.9, &[]).is_nan());
    }

    #[test]
    fn a_nightly_peak_longer_than_the_tail_sets_the_p95_though_most_samples_are_quiet() {
        // 100 steps: 90 quiet at 0.2, 10 at 0.9 (a tenth of the time, more than 5 %).
        let mut values = vec![0.2; 90];
        values.extend([0.9; 10]);
        let m = measure(
            &window(100),
            &series(&values),
            LoadStatistic::Quantile(0.95),
        )
        .unwrap();
        assert_eq!(m.value, 0.9);
        let m = measure(&window(100), &series(&values), LoadStatistic::Quantile(0.5)).unwrap();
        assert_eq!(m.value, 0.2);
    }

    #[test]
    fn the_peak_is_the_largest_value_and_the_step_it_was_at() {
        let m = measure(
            &window(4),
            &series(&[1.0, 7.0, 3.0, 7.0]),
            LoadStatistic::Max,
        )
        .unwrap();
        assert_eq!((m.value, m.peak), (7.0, 7.0));
        // The first of two equal peaks.
        assert_eq!(m.peak_at, window(4).at(1));
        assert_eq!((m.samples, m.steps), (4, 4));
        assert!(m.gaps.is_empty());
    }

    #[test]
    fn missing_steps_are_gaps_with_their_first_and_last_time() {
        let mut values = series(&[1.0; 10]);
        values.remove(7);
        values.drain(2..5); // steps 2, 3 and 4 missing
        let w = window(12); // steps 10 and 11 have no value at all
        let m = measure(&w, &values, LoadStatistic::Max).unwrap();
        assert_eq!((m.samples, m.steps), (6, 12));
        assert_eq!(
            m.gaps,
            vec![
                Gap {
                    from: w.at(2),
                    to: w.at(4),
                    steps: 3
                },
                Gap {
                    from: w.at(7),
                    to: w.at(7),
                    steps: 1
                },
                Gap {
                    from: w.at(10),
                    to: w.at(11),
                    steps: 2
                },
            ]
        );
        assert!((m.gap_share() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn values_that_are_not_finite_or_off_the_window_count_as_missing() {
        let w = window(3);
        let values = vec![
            (w.start_ms, f64::NAN),
            (w.start_ms + w.step_ms, f64::INFINITY),
            (w.start_ms + 2 * w.step_ms, 4.0),
            (w.end_ms + w.step_ms, 99.0),
            (w.start_ms - w.step_ms, 99.0),
        ];
        let m = measure(&w, &values, LoadStatistic::Max).unwrap();
        assert_eq!((m.value, m.samples), (4.0, 1));
        assert!(measure(&w, &[(w.start_ms, f64::NAN)], LoadStatistic::Max).is_none());
    }

    #[test]
    fn a_window_counts_its_first_and_last_step() {
        // 7 days at 5 minutes: 2016 intervals, 2017 evaluations.
        let week = Window {
            start_ms: 0,
            end_ms: 7 * 24 * 60 * MIN,
            step_ms: 5 * MIN,
        };
        assert_eq!(week.steps(), 2017);
        assert_eq!(
            Window {
                start_ms: 5,
                end_ms: 4,
                step_ms: 1
            }
            .steps(),
            0
        );
    }

    fn load(cpu: Option<Measured>, memory: Option<Measured>) -> NodeLoad {
        NodeLoad {
            url: "http://prometheus:9090".into(),
            window: window(10),
            statistic: LoadStatistic::Quantile(0.95),
            max_gap_share: 0.05,
            node_label: "node".into(),
            nodes: BTreeMap::from([("cp-1".to_string(), NodeMeasure { cpu, memory })]),
        }
    }

    #[test]
    fn a_node_with_more_gaps_than_allowed_is_unknown_naming_the_query_the_gap_and_the_setting() {
        let full = measure(&window(10), &series(&[1.0; 10]), LoadStatistic::Max);
        let gappy = measure(&window(10), &series(&[1.0; 8]), LoadStatistic::Max);
        let why = load(full.clone(), gappy)
            .of("cp-1")
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("capacity.prometheus.queries.memory lacks 2 of 10 steps (20.0%)"),
            "{why}"
        );
        assert!(
            why.contains("capacity.prometheus.max_gap_share 0.05"),
            "{why}"
        );
        assert!(
            why.contains("no value from 1970-01-01 17:20 to 1970-01-01 17:25 UTC (2 steps)"),
            "{why}"
        );
        assert!(load(full.clone(), full).of("cp-1").is_ok());
    }

    #[test]
    fn a_node_no_query_mentions_is_unknown_naming_both_queries_and_the_label() {
        let full = measure(&window(10), &series(&[1.0; 10]), LoadStatistic::Max);
        let why = load(full.clone(), full).of("cp-2").unwrap_err().to_string();
        assert!(
            why.contains("capacity.prometheus.queries.cpu gave no series with node=\"cp-2\""),
            "{why}"
        );
        assert!(
            why.contains("capacity.prometheus.queries.memory gave no series"),
            "{why}"
        );
    }

    #[test]
    fn the_statistic_is_named_as_a_percentile_or_max() {
        assert_eq!(LoadStatistic::Quantile(0.95).to_string(), "p95");
        assert_eq!(LoadStatistic::Quantile(0.999).to_string(), "p99.9");
        assert_eq!(LoadStatistic::Max.to_string(), "max");
    }
}
