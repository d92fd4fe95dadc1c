//! The fast placement against the reference, on small random clusters (a fixed seed, so a
//! failure reproduces): nodes on a few hosts and zones, some tainted, cordoned, not ready or
//! at their pod limit; pods of Deployments, StatefulSets, DaemonSets and no controller, with
//! node selectors, node affinity, tolerations, anti-affinity, spread and priorities. Every
//! host's whole prediction must be the same, to the last word.

use k8s_openapi::api::core::v1::Node;

use crate::state::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::schedule::{Mode, MoveOutcome};
use super::testing::*;
use super::{Input, Prediction, predict_with};

/// xorshift64*: small, deterministic, good enough to pick shapes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

fn random_nodes(rng: &mut Rng) -> Vec<Node> {
    let hosts = 2 + rng.below(4);
    let mut nodes = Vec::new();
    for h in 0..hosts {
        for k in 0..1 + rng.below(3) {
            let name = format!("n-{h}-{k}");
            let mut b = node(&name)
                .host(&format!("pve{h}"))
                .label("tier", rng.pick(&["a", "b"]))
                .allocatable(rng.pick(&["1", "2", "4"]), rng.pick(&["2Gi", "4Gi", "8Gi"]));
            if !rng.chance(15) {
                b = b.label("zone", rng.pick(&["z1", "z2", "z3"]));
            }
            b = if rng.chance(10) {
                b.not_ready()
            } else {
                b.ready()
            };
            if rng.chance(15) {
                b = b.taint("dedicated", rng.pick(&["NoSchedule", "NoExecute"]));
            }
            let mut n = b.build();
            if rng.chance(10) {
                n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
            }
            if rng.chance(15)
                && let Some(alloc) = n.status.as_mut().and_then(|s| s.allocatable.as_mut())
            {
                alloc.insert("pods".into(), Quantity(rng.pick(&["2", "3", "5"]).into()));
            }
            nodes.push(n);
        }
    }
    nodes
}

fn random_pods(rng: &mut Rng, nodes: &[Node]) -> Vec<Pod> {
    let apps = ["web", "db", "cache", "queue"];
    let count = 5 + rng.below(30);
    let mut pods = Vec::new();
    for i in 0..count {
        let app = rng.pick(&apps);
        let node_name = nodes[rng.below(nodes.len())]
            .metadata
            .name
            .clone()
            .unwrap_or_default();
        let mut p = pod(rng.pick(&["apps", "infra"]), &format!("{app}-{i}"))
            .labels(&[("app", app)])
            .on(&node_name)
            .requests(
                rng.pick(&["0", "100m", "500m", "1"]),
                rng.pick(&["0", "256Mi", "1Gi", "2Gi"]),
            )
            .build();
        p = match rng.below(10) {
            0 => p.owned("StatefulSet", app),
            1 => p.owned("DaemonSet", app),
            2 => p,
            _ => p.owned("ReplicaSet", &format!("{app}-rs")),
        };
        p = match rng.below(10) {
            0 => p,
            1 => p.tolerating("node.kubernetes.io/unreachable", "", None),
            2 => p.tolerating("", "", Some(60)),
            _ => p.evictable(),
        };
        if rng.chance(20) {
            p = p.tolerating("dedicated", "", None);
        }
        if rng.chance(15) {
            p = p.node_selector(&[("tier", rng.pick(&["a", "b"]))]);
        }
        if rng.chance(15) {
            p = p.node_affinity_in("zone", &[rng.pick(&["z1", "z2"]), rng.pick(&["z2", "z3"])]);
        }
        if rng.chance(30) {
            let key = rng.pick(&["kubernetes.io/hostname", "zone", "tier"]);
            p = p.anti_affinity(&[("app", rng.pick(&apps))], key);
        }
        if rng.chance(30) {
            let skew = 1 + rng.below(2) as i32;
            let key = rng.pick(&["kubernetes.io/hostname", "zone"]);
            p = p.spread(skew, key, &[("app", app)]);
            if rng.chance(30)
                && let Some(c) = p
                    .spec_mut()
                    .topology_spread_constraints
                    .as_mut()
                    .and_then(|c| c.last_mut())
            {
                c.node_taints_policy = Some("Honor".into());
            }
        }
        if rng.chance(20) {
            p.spec_mut().priority = Some(rng.pick(&["0", "100", "1000"]).parse().unwrap_or(0));
        }
        pods.push(p);
    }
    pods
}

fn both(seed: u64) -> (Prediction, Prediction) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let nodes = random_nodes(&mut rng);
    let pods = random_pods(&mut rng, &nodes);
    let s = state().nodes(nodes).pods(pods).build();
    let env = env();
    let input = Input {
        env: &env,
        state: &s,
        protected: &[],
        pause: &crate::pause::NEVER,
    };
    (
        predict_with(input, None, Mode::Fast),
        predict_with(input, None, Mode::Reference),
    )
}

#[test]
fn the_fast_placement_predicts_exactly_what_the_reference_does_on_random_clusters() {
    let (mut placed, mut nowhere) = (0, 0);
    for seed in 0..300 {
        let (fast, reference) = both(seed);
        let fast_json = serde_json::to_string_pretty(&fast).expect("serializes");
        let reference_json = serde_json::to_string_pretty(&reference).expect("serializes");
        assert!(
            fast_json == reference_json,
            "seed {seed}: the fast placement differs from the reference\nfast:\n{fast_json}\nreference:\n{reference_json}"
        );
        for m in fast.hosts.iter().flat_map(|h| &h.pods) {
            match m.outcome {
                MoveOutcome::Placed { .. } => placed += 1,
                MoveOutcome::Unschedulable { .. } => nowhere += 1,
                MoveOutcome::Stays { .. } | MoveOutcome::NotRecreated { .. } => {}
            }
        }
    }
    // The clusters exercise both answers, not only the easy one.
    assert!(placed > 500, "only {placed} pods placed");
    assert!(nowhere > 100, "only {nowhere} pods fit nowhere");
}
