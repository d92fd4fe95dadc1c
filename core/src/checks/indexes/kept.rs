//! The pairs' index kept from one evaluation to the next. `gates watch` evaluates again after
//! each change, and at 100,000 pods a read of every pod's labels was most of a change's
//! evaluation though one pod had changed. The state a change leaves shares every unchanged
//! pod (the same `Arc`) with the state before, so the pods that differ are found by
//! comparing pointers, and the index is edited for them alone: a pod taken away, put in or
//! replaced moves the positions after it, never what the other pods carry.
//!
//! Whatever the lists, the index equals a whole read of the new list: the walk pairs two
//! pods only when they are the same object, and a list too different to walk cheaply (a
//! relist replaces every pod) is read whole.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Asked, Pairs, ask, asks, read_pairs};
use crate::meta::labels;
use crate::state::Pod;

/// Beyond this many edits the list is read whole: each edit moves the positions of every
/// pod the index holds.
const MOST_EDITS: usize = 256;

/// The positions of the pods carrying each pair the trials ask for, for the pods of the
/// last state it was brought up to.
#[derive(Default)]
pub struct Kept {
    /// The pairs indexed: key → values.
    expected: Asked,
    /// The pods the index stands for: the last state's, the same `Arc`s in the same order.
    pods: Vec<Arc<Pod>>,
    pairs: Pairs,
    /// Whole reads of the pods so far (the first, and each list too different to walk).
    reads: u64,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("expected", &self.expected)
            .field("pods", &self.pods.len())
            .field("reads", &self.reads)
            .finish()
    }
}

/// What turns the list the index stands for into the new one, at position `at` of the list
/// as edited so far (the new list's first `at` pods, then the old list's rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    /// The old pod at `at` goes.
    Remove { at: usize },
    /// The new list's pod `at` comes in before it.
    Insert { at: usize },
    /// The old pod at `at` is replaced by the new list's pod `at`.
    Replace { at: usize },
}

impl Kept {
    /// An index of the pairs the selectors begin with (the pairs [`super::Indexes`] looks
    /// pods up by), empty until first brought up to a list.
    pub fn new<'s>(selectors: impl IntoIterator<Item = &'s BTreeMap<String, String>>) -> Kept {
        let mut expected = Asked::new();
        ask(&mut expected, selectors);
        Kept {
            expected,
            ..Kept::default()
        }
    }

    /// Whether the pods carrying `key: value` are looked up here.
    pub fn indexes(&self, key: &str, value: &str) -> bool {
        asks(&self.expected, key, value)
    }

    /// Each key's values → the positions of the pods carrying them, in the last list.
    pub(super) fn pairs(&self) -> &Pairs {
        &self.pairs
    }

    /// Bring the index up to `pods`: edited for the pods that differ from the last list,
    /// or read whole when the lists are too different (or on the first call).
    pub fn refresh(&mut self, pods: &[Arc<Pod>]) {
        if self.expected.is_empty() {
            return;
        }
        match (self.reads, edits(&self.pods, pods)) {
            (1.., Some(edits)) => {
                for edit in edits {
                    self.apply(edit, pods);
                }
            }
            _ => {
                self.pairs = read_pairs(pods, &self.expected);
                self.pods = pods.to_vec();
                self.reads += 1;
            }
        }
    }

    fn apply(&mut self, edit: Edit, new: &[Arc<Pod>]) {
        match edit {
            Edit::Remove { at } => {
                let gone = self.pods.remove(at);
                self.forget(&gone, at);
                self.shift(at, |i| i - 1);
            }
            Edit::Insert { at } => {
                self.shift(at, |i| i + 1);
                self.pods.insert(at, new[at].clone());
                self.note(&new[at], at);
            }
            Edit::Replace { at } => {
                let gone = std::mem::replace(&mut self.pods[at], new[at].clone());
                self.forget(&gone, at);
                self.note(&new[at], at);
            }
        }
    }

    /// The pairs `pod`, at `at`, carried: `at` taken out of them (and a pair no pod
    /// carries any more out of the index, as a whole read would leave it).
    fn forget(&mut self, pod: &Pod, at: usize) {
        for (key, value) in self.carried(pod) {
            let Some(by_value) = self.pairs.get_mut(&key) else {
                continue;
            };
            if let Some(list) = by_value.get_mut(&value)
                && let Ok(i) = list.binary_search(&(at as u32))
            {
                list.remove(i);
                if list.is_empty() {
                    by_value.remove(&value);
                }
            }
            if by_value.is_empty() {
                self.pairs.remove(&key);
            }
        }
    }

    /// The pairs `pod`, at `at`, carries: `at` put into them, in order.
    fn note(&mut self, pod: &Pod, at: usize) {
        for (key, value) in self.carried(pod) {
            let list = self.pairs.entry(key).or_default().entry(value).or_default();
            let i = list.partition_point(|&p| p < at as u32);
            list.insert(i, at as u32);
        }
    }

    /// The expected pairs `pod` carries.
    fn carried(&self, pod: &Pod) -> Vec<(String, String)> {
        let have = labels(&pod.metadata);
        self.expected
            .iter()
            .filter_map(|(key, values)| {
                let value = have.get(key)?;
                values.contains(value).then(|| (key.clone(), value.clone()))
            })
            .collect()
    }

    /// Every position at `from` or after, moved by `by`.
    fn shift(&mut self, from: usize, by: impl Fn(u32) -> u32) {
        for list in self.pairs.values_mut().flat_map(|v| v.values_mut()) {
            let start = list.partition_point(|&p| p < from as u32);
            for p in &mut list[start..] {
                *p = by(*p);
            }
        }
    }
}

/// The edits that turn `old` into `new`, walking both and pairing pods only when they are
/// the same object; `None` past [`MOST_EDITS`] or when the walk cannot tell a removal from
/// an insertion by the next pod.
fn edits(old: &[Arc<Pod>], new: &[Arc<Pod>]) -> Option<Vec<Edit>> {
    let same = |i: usize, j: usize| match (old.get(i), new.get(j)) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    };
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let edit = if i < old.len() && j < new.len() && same(i, j) {
            i += 1;
            j += 1;
            continue;
        } else if j == new.len() || (i < old.len() && same(i + 1, j)) {
            i += 1;
            Edit::Remove { at: j }
        } else if i == old.len() || same(i, j + 1) {
            j += 1;
            Edit::Insert { at: j - 1 }
        } else if same(i + 1, j + 1) {
            i += 1;
            j += 1;
            Edit::Replace { at: j - 1 }
        } else {
            return None;
        };
        out.push(edit);
        if out.len() > MOST_EDITS {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::pod;

    fn labelled(name: &str, app: &str) -> Arc<Pod> {
        Arc::new(pod("default", name).labels(&[("app", app)]).build())
    }

    fn kept() -> Kept {
        let selectors: Vec<BTreeMap<String, String>> = ["dns", "web"]
            .iter()
            .map(|v| BTreeMap::from([("app".to_string(), v.to_string())]))
            .collect();
        Kept::new(&selectors)
    }

    /// The index equals a whole read of `pods`.
    fn as_read_whole(kept: &Kept, pods: &[Arc<Pod>]) {
        assert_eq!(
            kept.pairs,
            read_pairs(pods, &kept.expected),
            "{:?}",
            names(pods)
        );
        assert!(kept.pods.iter().zip(pods).all(|(a, b)| Arc::ptr_eq(a, b)));
        assert_eq!(kept.pods.len(), pods.len());
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or(""))
            .collect()
    }

    #[test]
    fn a_changed_pod_is_edited_into_the_index_without_reading_the_others() {
        let a = labelled("a", "dns");
        let b = labelled("b", "web");
        let c = labelled("c", "dns");
        let mut kept = kept();
        let first = vec![a.clone(), b.clone(), c.clone()];
        kept.refresh(&first);
        as_read_whole(&kept, &first);
        assert_eq!(kept.reads, 1);

        // b turns into a dns pod, a goes, d comes in at the end and z at the start.
        let b2 = labelled("b", "dns");
        let d = labelled("d", "web");
        let z = labelled("0", "web");
        for next in [
            vec![a.clone(), b2.clone(), c.clone()],
            vec![b2.clone(), c.clone()],
            vec![b2.clone(), c.clone(), d.clone()],
            vec![z.clone(), b2.clone(), c.clone(), d.clone()],
            vec![z.clone(), c.clone(), d.clone()],
            vec![],
        ] {
            kept.refresh(&next);
            as_read_whole(&kept, &next);
        }
        // Each change above, the last (every pod gone) too, was edited in: one whole read.
        assert_eq!(kept.reads, 1);
    }

    #[test]
    fn a_list_too_different_to_walk_is_read_whole_and_still_equals_a_whole_read() {
        let mut kept = kept();
        let first: Vec<Arc<Pod>> = (0..600)
            .map(|i| labelled(&format!("p{i:03}"), ["dns", "web", "db"][i % 3]))
            .collect();
        kept.refresh(&first);
        // A relist: every pod a new object, though equal.
        let relisted: Vec<Arc<Pod>> = first.iter().map(|p| Arc::new((**p).clone())).collect();
        kept.refresh(&relisted);
        as_read_whole(&kept, &relisted);
        assert_eq!(kept.reads, 2, "more than {MOST_EDITS} edits: read whole");
        // Two neighbours swapped: neither a removal nor an insertion by the next pod.
        let mut swapped = relisted.clone();
        swapped.swap(10, 11);
        swapped[10] = Arc::new((*swapped[10]).clone());
        swapped[11] = Arc::new((*swapped[11]).clone());
        let mut shuffled = swapped.clone();
        shuffled.swap(20, 300);
        kept.refresh(&shuffled);
        as_read_whole(&kept, &shuffled);
    }

    /// Random edits (pods taken away, put in, replaced with other labels, several at once),
    /// each list compared with a whole read: the walk never pairs the wrong pods.
    #[test]
    fn random_changes_leave_the_index_equal_to_a_whole_read() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let apps = ["dns", "web", "db", ""];
        let mut pods: Vec<Arc<Pod>> = (0..40)
            .map(|i| labelled(&format!("p{i:03}"), apps[i % 4]))
            .collect();
        let mut kept = kept();
        kept.refresh(&pods);
        let mut fresh = 1000;
        for _ in 0..500 {
            for _ in 0..1 + next(4) {
                fresh += 1;
                let pod = labelled(&format!("p{fresh}"), apps[next(4)]);
                match next(3) {
                    0 if !pods.is_empty() => {
                        pods.remove(next(pods.len()));
                    }
                    1 => pods.insert(next(pods.len() + 1), pod),
                    _ if !pods.is_empty() => {
                        let at = next(pods.len());
                        pods[at] = pod;
                    }
                    _ => pods.push(pod),
                }
            }
            kept.refresh(&pods);
            as_read_whole(&kept, &pods);
        }
        assert!(
            kept.reads < 500,
            "most changes were edited in: {}",
            kept.reads
        );
    }

    #[test]
    fn with_no_pair_asked_for_nothing_is_read() {
        let mut kept = Kept::new(&[]);
        kept.refresh(&[labelled("a", "dns")]);
        assert_eq!(kept.reads, 0);
        assert!(!kept.indexes("app", "dns"));
    }

    #[test]
    fn the_walk_names_each_kind_of_edit_at_its_position() {
        let [a, b, c, d] = ["a", "b", "c", "d"].map(|n| labelled(n, "dns"));
        let b2 = labelled("b", "web");
        assert_eq!(
            edits(
                &[a.clone(), b.clone(), c.clone()],
                &[a.clone(), b2.clone(), c.clone(), d.clone()]
            ),
            Some(vec![Edit::Replace { at: 1 }, Edit::Insert { at: 3 }])
        );
        assert_eq!(
            edits(&[a.clone(), b.clone(), c.clone()], &[b.clone(), c.clone()]),
            Some(vec![Edit::Remove { at: 0 }])
        );
        assert_eq!(
            edits(&[a.clone(), b.clone()], &[b.clone(), a.clone()]),
            Some(vec![Edit::Remove { at: 0 }, Edit::Insert { at: 1 }])
        );
    }
}
