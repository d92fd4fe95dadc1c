//! Whether a pod template's scheduling constraints keep its copies on different hosts. Only a
//! constraint the scheduler must honour counts: a *required* pod anti-affinity, or a topology
//! spread that does not `ScheduleAnyway` (`whenUnsatisfiable` defaults to `DoNotSchedule`),
//! over `kubernetes.io/hostname` or the environment's host label. A *preferred*
//! anti-affinity is a wish the scheduler may drop when nodes are full or a host is down, so
//! copies may share a host: not a spread. (Kubernetes `pkg/scheduler/framework/plugins`:
//! `interpodaffinity` filters only on required terms, `podtopologyspread` filters only on
//! `DoNotSchedule` constraints.)

use crate::declared::site::Site;
use crate::declared::yaml::Node;

const HOSTNAME: &str = "kubernetes.io/hostname";

/// What the constraints do, with the line that says so.
#[derive(Debug, Clone, PartialEq)]
pub enum Spread {
    /// Copies must land on different hosts.
    Host(Site, String),
    /// Only a preference, or a spread over another key: copies may share a host.
    Soft(Site, String),
    /// Nothing is declared.
    None,
}

/// The spread of `affinity` (a pod's `affinity` object) and `constraints` (its
/// `topologySpreadConstraints` list), judged over `host_label` and the hostname.
pub fn of(affinity: Option<&Node>, constraints: Option<&Node>, host_label: &str) -> Spread {
    let host_key = |key: Option<&str>| key.is_some_and(|k| k == HOSTNAME || k == host_label);
    let anti = affinity.and_then(|a| a.get(&["podAntiAffinity"]));
    for term in anti
        .and_then(|a| a.get(&["requiredDuringSchedulingIgnoredDuringExecution"]))
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        if host_key(term.get_str(&["topologyKey"])) {
            return Spread::Host(
                term.site.clone(),
                format!(
                    "required pod anti-affinity over {}",
                    term.get_str(&["topologyKey"]).unwrap_or_default()
                ),
            );
        }
    }
    for constraint in constraints.and_then(Node::as_seq).unwrap_or_default() {
        let hard = constraint.get_str(&["whenUnsatisfiable"]) != Some("ScheduleAnyway");
        if hard && host_key(constraint.get_str(&["topologyKey"])) {
            return Spread::Host(
                constraint.site.clone(),
                format!(
                    "topology spread over {} (DoNotSchedule)",
                    constraint.get_str(&["topologyKey"]).unwrap_or_default()
                ),
            );
        }
    }
    if let Some(preferred) =
        anti.and_then(|a| a.get(&["preferredDuringSchedulingIgnoredDuringExecution"]))
    {
        return Spread::Soft(
            preferred.site.clone(),
            "only a preferred pod anti-affinity, which the scheduler may drop: copies may share a host"
                .to_string(),
        );
    }
    if let Some(first) = constraints.and_then(Node::as_seq).and_then(|c| c.first()) {
        return Spread::Soft(
            first.site.clone(),
            format!(
                "a topology spread that is not a hard spread over {HOSTNAME} or {host_label} (ScheduleAnyway, or another key): copies may share a host"
            ),
        );
    }
    if let Some(a) = anti.or(affinity) {
        return Spread::Soft(
            a.site.clone(),
            "an affinity without a required anti-affinity over the host: copies may share a host"
                .to_string(),
        );
    }
    Spread::None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declared::yaml::parse;

    fn judge(text: &str) -> Spread {
        let doc = parse("pod.yaml", text).unwrap().remove(0);
        of(
            doc.get(&["affinity"]),
            doc.get(&["topologySpreadConstraints"]),
            "topology.kubernetes.io/zone",
        )
    }

    #[test]
    fn a_required_anti_affinity_over_the_hostname_or_host_label_is_a_host_spread() {
        let hard = "affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      - topologyKey: kubernetes.io/hostname\n        labelSelector: {matchLabels: {app: a}}\n";
        assert!(matches!(judge(hard), Spread::Host(site, _) if site.line == 4));
        let zone = "topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    labelSelector: {matchLabels: {app: a}}\n";
        assert!(matches!(judge(zone), Spread::Host(..)));
    }

    #[test]
    fn a_preferred_anti_affinity_or_a_schedule_anyway_spread_is_not_a_host_spread() {
        let soft = "affinity:\n  podAntiAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n      - weight: 1\n        podAffinityTerm:\n          topologyKey: kubernetes.io/hostname\n";
        assert!(matches!(judge(soft), Spread::Soft(..)));
        let anyway = "topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKey: kubernetes.io/hostname\n    whenUnsatisfiable: ScheduleAnyway\n";
        assert!(matches!(judge(anyway), Spread::Soft(..)));
        let other_key = "affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      - topologyKey: example.org/rack\n";
        assert!(matches!(judge(other_key), Spread::Soft(..)));
        assert_eq!(judge("other: 1\n"), Spread::None);
    }
}
