//! Placing one pod fast: the same filters and score as [`Sim::place`], over the nodes the
//! pod's template allows (its static filters evaluated once per template), each shape's nodes
//! walked best first so the walk stops at the first that passes (see [`super::score`]), with
//! anti-affinity and spread judged by domain number instead of label lookups. It only finds the node; when
//! none fits, the reference words the scheduler's message, so the two cannot disagree on why.

use std::cmp::Ordering;

use super::super::cluster::Res;
use super::super::domains::{NONE, Topology};
use super::super::filters::{self, PodTerm};
use super::super::templates::Template;
use super::Sim;
use super::score::Score;

/// One spread constraint's counts: matching pods per domain (`None`: no eligible node has
/// the domain), the least count and how many domains are eligible.
struct SpreadCounts<'d> {
    spread: filters::Spread,
    topology: &'d Topology,
    by_domain: Vec<Option<i64>>,
    min: i64,
    domains: usize,
    self_matches: bool,
}

impl Sim<'_, '_> {
    /// The node pod `i` goes to, or `None` when no node fits (or the pod has no template,
    /// which the reference then handles).
    pub(super) fn place_fast(&self, i: usize) -> Option<usize> {
        let cluster = self.cluster;
        let shared = self.shared;
        let p = &cluster.pods[i];
        // Host ports are judged by the reference, which knows what each node binds.
        if !filters::host_ports(p.pod).is_empty() {
            return None;
        }
        let template = shared.templates.of(i)?;
        let domains = &shared.domains;

        // The pod's own anti-affinity: domains that already hold a pod a term counts.
        let mut blocked: Vec<(&Topology, Vec<bool>)> = Vec::new();
        for term in shared.terms(i) {
            let topology = domains.get(&term.topology_key)?;
            blocked.push((topology, self.blocked_domains(term, topology)));
        }
        // Existing and placed pods' anti-affinity: (domains, domain) pairs that repel it.
        let forbidden = self.forbidden_domains(p)?;
        // Spread constraints.
        let mut spreads = Vec::new();
        for spread in filters::spread_constraints(p.pod, p.labels) {
            let topology = domains.get(&spread.topology_key)?;
            spreads.push(self.spread_counts_fast(i, template, spread, topology));
        }

        let want = p.requests;
        let passes = |n: usize| -> bool {
            if self.lost[n] && !template.tolerates_lost {
                return false;
            }
            if !self.has_room(n, want) {
                return false;
            }
            for (topology, blocked) in &blocked {
                let d = topology.of_node[n];
                if d != NONE && blocked[d as usize] {
                    return false;
                }
            }
            if forbidden.iter().any(|(t, d)| t.of_node[n] == *d) {
                return false;
            }
            spreads.iter().all(|c| {
                let d = c.topology.of_node[n];
                d != NONE
                    && filters::spread_allows(
                        &c.spread,
                        c.by_domain[d as usize].unwrap_or(0),
                        c.self_matches,
                        c.min,
                        c.domains,
                    )
            })
        };
        // The best score wins; among equal scores the lower node index, as in the reference.
        let mut best: Option<(Score, usize)> = None;
        let mut consider = |n: usize| {
            let score = Score::of(cluster.nodes[n].allocatable, self.requested[n].plus(want));
            let better = best.is_none_or(|(b, m)| match score.cmp(b) {
                Ordering::Greater => true,
                Ordering::Equal => n < m,
                Ordering::Less => false,
            });
            if better {
                best = Some((score, n));
            }
        };
        if template.feasible.len() * 4 < cluster.nodes.len() {
            // A template that allows few nodes: walking them is cheaper than the shapes.
            template
                .feasible
                .iter()
                .copied()
                .filter(|&n| passes(n))
                .for_each(&mut consider);
        } else {
            // Each shape's best node that passes, then the best of those.
            let shapes = &self.shapes;
            for (group, _) in shapes
                .groups
                .iter()
                .zip(&shapes.lost)
                .filter(|&(_, &lost)| !lost || template.tolerates_lost)
            {
                if let Some(&(_, n)) = group
                    .iter()
                    .find(|&&(_, n)| template.feasible_set.contains(n) && passes(n))
                {
                    consider(n);
                }
            }
            for &n in &self.shapes.loose {
                if template.feasible_set.contains(n) && passes(n) {
                    consider(n);
                }
            }
        }
        best.map(|(_, n)| n)
    }

    /// Whether node `n` has room for `want` (CPU, memory and a pod slot) beside what is
    /// placed there: the scheduler's NodeResourcesFit filter.
    fn has_room(&self, n: usize, want: Res) -> bool {
        let (alloc, requested) = (self.cluster.nodes[n].allocatable, self.requested[n]);
        !((want.cpu_m > 0 && want.cpu_m > alloc.cpu_m - requested.cpu_m)
            || (want.mem > 0 && want.mem > alloc.mem - requested.mem)
            || requested.pods + 1 > alloc.pods)
    }

    /// Per domain of `topology`: whether a pod `term` counts runs there.
    fn blocked_domains(&self, term: &PodTerm, topology: &Topology) -> Vec<bool> {
        let cluster = self.cluster;
        let mut out = vec![false; topology.count];
        for (q, n) in self.candidates(term.namespaces.as_deref()) {
            let pod = &cluster.pods[q];
            let d = topology.of_node[n];
            if d != NONE && !out[d as usize] && term.counts(pod.namespace, pod.labels) {
                out[d as usize] = true;
            }
        }
        out
    }

    /// The domains where a present pod's required anti-affinity repels `p`; `None` when a
    /// term's key was not indexed (the reference then decides).
    fn forbidden_domains(&self, p: &super::PodInfo<'_>) -> Option<Vec<(&Topology, u32)>> {
        let cluster = self.cluster;
        let shared = self.shared;
        let mut out = Vec::new();
        let existing = shared
            .holders_by_namespace
            .get(p.namespace)
            .into_iter()
            .flatten()
            .map(|(holder, term)| (*holder, term));
        let everywhere = shared.holders_everywhere.iter().map(|(h, t)| (*h, t));
        for (holder, term) in existing.chain(everywhere) {
            if !self.present(holder) || !term.counts(p.namespace, p.labels) {
                continue;
            }
            if let Some(n) = cluster.pods[holder].node {
                let topology = shared.domains.get(&term.topology_key)?;
                let d = topology.of_node[n];
                if d != NONE {
                    out.push((topology, d));
                }
            }
        }
        for &(q, n) in &self.placed_holders {
            for term in shared.terms(q) {
                if term.counts(p.namespace, p.labels) {
                    let topology = shared.domains.get(&term.topology_key)?;
                    let d = topology.of_node[n];
                    if d != NONE {
                        out.push((topology, d));
                    }
                }
            }
        }
        Some(out)
    }

    /// Matching pods per eligible domain for one spread constraint of pod `i`.
    fn spread_counts_fast<'d>(
        &self,
        i: usize,
        template: &Template,
        spread: filters::Spread,
        topology: &'d Topology,
    ) -> SpreadCounts<'d> {
        let cluster = self.cluster;
        let p = &cluster.pods[i];
        let mut eligible = vec![false; cluster.nodes.len()];
        let mut by_domain: Vec<Option<i64>> = vec![None; topology.count];
        for (n, e) in eligible.iter_mut().enumerate() {
            let d = topology.of_node[n];
            if d == NONE {
                continue;
            }
            if spread.honor_affinity && !template.affinity_ok.contains(n) {
                continue;
            }
            if spread.honor_taints
                && (!template.taints_ok.contains(n) || (self.lost[n] && !template.tolerates_lost))
            {
                continue;
            }
            *e = true;
            by_domain[d as usize].get_or_insert(0);
        }
        let ns = [p.namespace.to_string()];
        for (q, n) in self.candidates(Some(&ns)) {
            let d = topology.of_node[n];
            if eligible[n] && d != NONE && spread.selector.matches(cluster.pods[q].labels) {
                *by_domain[d as usize].get_or_insert(0) += 1;
            }
        }
        let min = by_domain.iter().flatten().copied().min().unwrap_or(0);
        let domains = by_domain.iter().flatten().count();
        let self_matches = spread.selector.matches(p.labels);
        SpreadCounts {
            spread,
            topology,
            by_domain,
            min,
            domains,
            self_matches,
        }
    }
}
