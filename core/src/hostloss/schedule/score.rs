//! The scheduler's default score ("least allocated": the mean share of CPU and memory a node
//! has left after the pod is placed), compared exactly, and the nodes of one shape kept in the
//! order of that score.
//!
//! Exact fractions instead of floating point let the fast placement and the reference agree
//! on every tie: two nodes with the same share left are equal, and the one with the lower
//! index wins, as when the reference walks the nodes in order. Nodes with the same
//! allocatable CPU and memory (a cluster has a few shapes) rank the same for every pod: the
//! pod's request shifts each node's share by the same amount, so the order of a shape's nodes
//! depends only on what they already carry. Placing a pod then walks a shape's nodes best
//! first and stops at the first that passes the filters, instead of scoring every node.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use super::super::cluster::Res;

/// A node's score for one pod, as the fraction `num / den` (`den > 0`). Twice the
/// scheduler's mean; the factor does not change the order.
#[derive(Debug, Clone, Copy)]
pub struct Score {
    num: i128,
    den: i128,
}

impl Score {
    /// The score of a node with `allocatable` once it carries `after`. A resource the node
    /// does not offer (allocatable zero) adds nothing, as in the scheduler.
    pub fn of(allocatable: Res, after: Res) -> Score {
        let (ac, am) = (allocatable.cpu_m as i128, allocatable.mem as i128);
        let (uc, um) = (after.cpu_m as i128, after.mem as i128);
        match (ac > 0, am > 0) {
            (true, true) => Score {
                num: (ac - uc) * am + (am - um) * ac,
                den: ac * am,
            },
            (true, false) => Score {
                num: ac - uc,
                den: ac,
            },
            (false, true) => Score {
                num: am - um,
                den: am,
            },
            (false, false) => Score { num: 0, den: 1 },
        }
    }

    /// The order of two scores; exact where the products fit, else in floating point (only
    /// for requests far beyond any real node).
    pub fn cmp(self, other: Score) -> Ordering {
        match (
            self.num.checked_mul(other.den),
            other.num.checked_mul(self.den),
        ) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => (self.num as f64 / self.den as f64)
                .total_cmp(&(other.num as f64 / other.den as f64)),
        }
    }

    /// Whether `self` is strictly better than `other`.
    pub fn beats(self, other: Score) -> bool {
        self.cmp(other) == Ordering::Greater
    }
}

/// The nodes that offer both CPU and memory, grouped by their allocatable CPU and memory,
/// each group ordered best first for any pod.
#[derive(Debug, Clone, Default)]
pub struct Shapes {
    /// Per group, (rank, node): a lower rank is a better score; ties by node index.
    pub groups: Vec<BTreeSet<(i128, usize)>>,
    /// Per node, its group (`None`: a node without CPU or memory, scored one by one).
    pub of_node: Vec<Option<usize>>,
    /// Per group, its allocatable.
    pub allocatable: Vec<Res>,
    /// Nodes in no group.
    pub loose: Vec<usize>,
    /// Per group, whether it holds lost nodes (set apart by [`Shapes::set_apart`]).
    pub lost: Vec<bool>,
}

impl Shapes {
    /// Groups nodes by allocatable, ranked by what they carry now.
    pub fn new(allocatable: &[Res], requested: &[Res]) -> Shapes {
        let mut index: HashMap<(i64, i64), usize> = HashMap::new();
        let mut shapes = Shapes::default();
        for (n, (&alloc, &used)) in allocatable.iter().zip(requested).enumerate() {
            if alloc.cpu_m <= 0 || alloc.mem <= 0 {
                shapes.of_node.push(None);
                shapes.loose.push(n);
                continue;
            }
            let g = *index.entry((alloc.cpu_m, alloc.mem)).or_insert_with(|| {
                shapes.groups.push(BTreeSet::new());
                shapes.allocatable.push(alloc);
                shapes.lost.push(false);
                shapes.groups.len() - 1
            });
            shapes.of_node.push(Some(g));
            shapes.groups[g].insert((rank(alloc, used), n));
        }
        shapes
    }

    /// Moves the `lost` nodes (carrying `requested`) into groups of their own, one per shape.
    ///
    /// The lost nodes keep what they carried, so as the survivors fill up the lost nodes
    /// rise to the front of their shape, and a pod that cannot go there walked past all of
    /// them for every placement (at 1,000 lost nodes and 20,000 pods, most of a host's
    /// prediction). Apart, a walk skips them in one step. The best node that passes is the
    /// same: each group offers its best passing node and the best of those wins.
    pub fn set_apart(&mut self, lost: &[usize], requested: &[Res]) {
        let mut lost_group: HashMap<usize, usize> = HashMap::new();
        for &n in lost {
            let Some(g) = self.of_node[n] else {
                continue;
            };
            if self.lost[g] {
                continue;
            }
            let alloc = self.allocatable[g];
            let apart = *lost_group.entry(g).or_insert_with(|| {
                self.groups.push(BTreeSet::new());
                self.allocatable.push(alloc);
                self.lost.push(true);
                self.groups.len() - 1
            });
            let key = (rank(alloc, requested[n]), n);
            if self.groups[g].remove(&key) {
                self.groups[apart].insert(key);
                self.of_node[n] = Some(apart);
            }
        }
    }

    /// Records that node `n` now carries `after` instead of `before`.
    pub fn carry(&mut self, n: usize, before: Res, after: Res) {
        if let Some(g) = self.of_node[n] {
            let alloc = self.allocatable[g];
            self.groups[g].remove(&(rank(alloc, before), n));
            self.groups[g].insert((rank(alloc, after), n));
        }
    }
}

/// Within one shape, a lower rank means more left: the score's numerator without the terms
/// every node of the shape shares.
fn rank(alloc: Res, used: Res) -> i128 {
    used.cpu_m as i128 * alloc.mem as i128 + used.mem as i128 * alloc.cpu_m as i128
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(cpu_m: i64, mem: i64) -> Res {
        Res {
            cpu_m,
            mem,
            pods: 0,
        }
    }

    #[test]
    fn a_node_with_more_left_scores_higher() {
        let alloc = res(4000, 8 << 30);
        assert!(Score::of(alloc, res(1000, 1 << 30)).beats(Score::of(alloc, res(2000, 1 << 30))));
        assert!(!Score::of(alloc, res(2000, 1 << 30)).beats(Score::of(alloc, res(1000, 1 << 30))));
    }

    #[test]
    fn equal_shares_left_are_a_tie_even_where_floating_point_would_round_apart() {
        // 1/3 of CPU left plus 2/3 of memory equals 2/3 plus 1/3.
        let a = Score::of(res(3000, 3 << 30), res(2000, 1 << 30));
        let b = Score::of(res(3000, 3 << 30), res(1000, 2 << 30));
        assert_eq!(a.cmp(b), Ordering::Equal);
    }

    #[test]
    fn a_resource_the_node_does_not_offer_adds_nothing() {
        let no_memory = Score::of(res(1000, 0), res(500, 123));
        let half = Score::of(res(1000, 1000), res(500, 1000));
        assert_eq!(no_memory.cmp(half), Ordering::Equal);
    }

    #[test]
    fn nodes_of_one_shape_are_ranked_as_any_pod_would_score_them() {
        let alloc = res(4000, 16 << 30);
        let carried = [res(3000, 1 << 30), res(1000, 12 << 30), res(2000, 4 << 30)];
        let shapes = Shapes::new(&[alloc; 3], &carried);
        let order: Vec<usize> = shapes.groups[0].iter().map(|&(_, n)| n).collect();
        for want in [res(0, 0), res(500, 1 << 30), res(100, 8 << 30)] {
            let mut by_score: Vec<usize> = vec![0, 1, 2];
            by_score.sort_by(|&a, &b| {
                Score::of(alloc, carried[b].plus(want)).cmp(Score::of(alloc, carried[a].plus(want)))
            });
            assert_eq!(order, by_score, "request {want:?}");
        }
    }

    #[test]
    fn carrying_more_moves_a_node_back_in_its_shape() {
        let alloc = res(4000, 16 << 30);
        let mut shapes = Shapes::new(&[alloc; 2], &[res(0, 0), res(1000, 1 << 30)]);
        shapes.carry(0, res(0, 0), res(2000, 2 << 30));
        let order: Vec<usize> = shapes.groups[0].iter().map(|&(_, n)| n).collect();
        assert_eq!(order, vec![1, 0]);
    }

    #[test]
    fn lost_nodes_set_apart_keep_their_order_and_follow_what_they_carry() {
        let alloc = res(4000, 16 << 30);
        let carried = [
            res(3000, 1 << 30),
            res(0, 0),
            res(2000, 4 << 30),
            res(1000, 0),
        ];
        let mut shapes = Shapes::new(&[alloc; 4], &carried);
        shapes.set_apart(&[1, 3], &carried);
        let order = |g: usize, shapes: &Shapes| -> Vec<usize> {
            shapes.groups[g].iter().map(|&(_, n)| n).collect()
        };
        assert_eq!(shapes.lost, vec![false, true]);
        assert_eq!(order(0, &shapes), vec![2, 0]);
        assert_eq!(order(1, &shapes), vec![1, 3]);
        assert_eq!(shapes.of_node, vec![Some(0), Some(1), Some(0), Some(1)]);
        // A pod placed on a lost node (one that tolerates the loss) moves it within its group.
        shapes.carry(1, res(0, 0), res(2000, 2 << 30));
        assert_eq!(order(1, &shapes), vec![3, 1]);
        // Setting apart twice changes nothing.
        let before = shapes.clone();
        shapes.set_apart(
            &[1, 3],
            &[
                res(2000, 2 << 30),
                res(2000, 2 << 30),
                res(0, 0),
                res(1000, 0),
            ],
        );
        assert_eq!(shapes.groups, before.groups);
    }

    #[test]
    fn nodes_without_cpu_or_memory_are_kept_apart() {
        let shapes = Shapes::new(&[res(0, 1 << 30), res(1000, 1 << 30)], &[res(0, 0); 2]);
        assert_eq!(shapes.loose, vec![0]);
        assert_eq!(shapes.of_node, vec![None, Some(0)]);
    }
}
