//! Whose downtime an unobserved interval is.
//!
//! The workloads probes read the controllers' pods through the Kubernetes API. When the host
//! that holds the API VIP goes down, the API is unreachable until Talos moves the VIP, and
//! for that time the workloads cannot be observed at all. That time is already measured and
//! judged: the API probes saw it as an outage and hold it to the API budget. So time a
//! workloads probe could not observe, lying entirely within an outage an API probe measured
//! (widened at each edge by the slack between two probes' sampling, one interval plus one
//! sample timeout), is attributed to that API outage: it does not count against the
//! workloads budget, and the workloads trial says it was unknown and why. Unknown time
//! outside such an outage, or reaching past it, still counts as possibly down, and is never
//! "available throughout".

use std::time::Duration;

use crate::chaos::timeline::{Interval, Sample, outages};

/// Whether a probe reads through the Kubernetes API (and so is blind while it is down).
pub fn reads_through_api(probe: &str) -> bool {
    probe.starts_with("workloads::")
}

/// Whether a probe measures the API itself.
pub fn measures_api(probe: &str) -> bool {
    probe.starts_with("api-")
}

/// The outages the API probes measured, and how far apart two probes may see one edge.
#[derive(Debug, Clone, Default)]
pub struct ApiOutages {
    outages: Vec<(Interval, String)>,
    slack: Duration,
}

impl ApiOutages {
    /// No API outage: nothing is attributed.
    pub fn none() -> Self {
        ApiOutages::default()
    }

    /// The outages of every API probe among `probes` (name and samples).
    pub fn of<'a>(
        probes: impl IntoIterator<Item = (&'a str, &'a [Sample])>,
        slack: Duration,
    ) -> Self {
        let outages = probes
            .into_iter()
            .filter(|(name, _)| measures_api(name))
            .flat_map(|(name, samples)| {
                outages(samples)
                    .into_iter()
                    .map(move |i| (i, name.to_string()))
            })
            .collect();
        ApiOutages { outages, slack }
    }

    /// The API outage (and the probe that measured it) that holds `unknown` entirely.
    pub fn covering(&self, unknown: &Interval) -> Option<(&Interval, &str)> {
        self.outages
            .iter()
            .find(|(outage, _)| {
                outage.start.saturating_sub(self.slack) <= unknown.start
                    && unknown.end <= outage.end + self.slack
            })
            .map(|(outage, probe)| (outage, probe.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn interval(start: f64, end: f64) -> Interval {
        Interval {
            start: secs(start),
            end: secs(end),
        }
    }

    fn api(pattern: &str) -> Vec<Sample> {
        crate::chaos::judge::budget::test_samples(pattern)
    }

    #[test]
    fn an_unknown_interval_inside_a_measured_api_outage_is_covered_with_one_interval_of_slack() {
        let samples = api("++----++");
        let outages = ApiOutages::of([("api-vip-new-connection", samples.as_slice())], secs(1.0));
        let (outage, probe) = outages.covering(&interval(1.0, 7.0)).unwrap();
        assert_eq!(*outage, interval(2.0, 6.0));
        assert_eq!(probe, "api-vip-new-connection");
        assert!(outages.covering(&interval(0.5, 6.0)).is_none());
        assert!(outages.covering(&interval(2.0, 7.5)).is_none());
    }

    #[test]
    fn only_api_probes_excuse_anything() {
        let samples = api("++----++");
        let outages = ApiOutages::of([("ingress::whoami", samples.as_slice())], secs(1.0));
        assert!(outages.covering(&interval(3.0, 4.0)).is_none());
        assert!(ApiOutages::none().covering(&interval(3.0, 4.0)).is_none());
    }
}
