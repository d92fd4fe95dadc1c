//! What several trials of one evaluation look up in the same large list, built once per
//! evaluation on first use. Ten controller trials each looking for their pods among a large
//! cluster's 100,000 used to read every pod ten times; they now share one index of the pods
//! by label and read only the pods that carry their labels.
//!
//! An index only narrows: every check still applies its whole filter to what the index
//! gives, so a finding is the same with or without it (a test compares both on every
//! fixture).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use crate::meta::labels;
use crate::state::{Pod, State};

/// The lazily built indexes over one state.
pub struct Indexes<'a> {
    state: &'a State,
    /// Off, every lookup reads its list whole: what the index is compared with.
    enabled: bool,
    pods_by_label: OnceLock<PodsByLabel>,
}

impl<'a> Indexes<'a> {
    pub fn new(state: &'a State) -> Indexes<'a> {
        Indexes {
            state,
            enabled: true,
            pods_by_label: OnceLock::new(),
        }
    }

    /// Indexes that look nothing up: every lookup reads its list whole. The findings over
    /// them are the findings without indexes, which the indexed ones must equal.
    pub fn unindexed(state: &'a State) -> Indexes<'a> {
        Indexes {
            enabled: false,
            ..Indexes::new(state)
        }
    }

    /// The pods of `pods` (the state's pods, as the check read them) that carry every label
    /// of `wanted`, in their order in the list. `wanted` empty gives every pod.
    pub fn pods_labelled<'p>(
        &self,
        pods: &'p [Pod],
        wanted: &BTreeMap<String, String>,
    ) -> Vec<&'p Pod> {
        let indexed = self.state.pods.get("pods").ok();
        if !self.enabled
            || wanted.is_empty()
            || !indexed.is_some_and(|all| std::ptr::eq(all.as_slice(), pods))
        {
            // Not the state's list (a check's own subset): read it whole.
            return pods.iter().filter(|p| carries(p, wanted)).collect();
        }
        let index = self.pods_by_label.get_or_init(|| PodsByLabel::new(pods));
        index.carrying(pods, wanted)
    }
}

impl fmt::Debug for Indexes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Indexes")
            .field(
                "pods_by_label",
                &self.pods_by_label.get().map(|i| i.by_label.len()),
            )
            .finish()
    }
}

fn carries(pod: &Pod, wanted: &BTreeMap<String, String>) -> bool {
    let have = labels(&pod.metadata);
    wanted.iter().all(|(k, v)| have.get(k) == Some(v))
}

/// Each label pair's hash → the positions of the pods that carry a pair with that hash,
/// ascending. Keyed by hash so that the index borrows nothing (a check's context stays
/// covariant); two pairs that share a hash only widen a list, which [`carries`] narrows.
struct PodsByLabel {
    by_label: HashMap<u64, Vec<u32>>,
}

fn pair_hash(key: &str, value: &str) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    (key, value).hash(&mut hasher);
    hasher.finish()
}

impl PodsByLabel {
    fn new(pods: &[Pod]) -> PodsByLabel {
        let mut by_label: HashMap<u64, Vec<u32>> = HashMap::new();
        for (i, pod) in pods.iter().enumerate() {
            for (key, value) in labels(&pod.metadata) {
                let list = by_label.entry(pair_hash(key, value)).or_default();
                // A pod whose two pairs share a hash is listed once.
                if list.last() != Some(&(i as u32)) {
                    list.push(i as u32);
                }
            }
        }
        PodsByLabel { by_label }
    }

    /// The pods of `pods` (the list the index was built from) carrying every pair of
    /// `wanted` (not empty): the shortest pair's list, checked against every pair.
    fn carrying<'p>(&self, pods: &'p [Pod], wanted: &BTreeMap<String, String>) -> Vec<&'p Pod> {
        let shortest = wanted
            .iter()
            .map(|(k, v)| self.by_label.get(&pair_hash(k, v)))
            .min_by_key(|list| list.map_or(0, Vec::len));
        let Some(Some(list)) = shortest else {
            return Vec::new();
        };
        list.iter()
            .map(|&i| &pods[i as usize])
            .filter(|p| carries(p, wanted))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;

    fn pod_with(name: &str, pairs: &[(&str, &str)]) -> Pod {
        pod("default", name).labels(pairs).build()
    }

    fn state_of(pods: Vec<Pod>) -> State {
        state().pods(pods).build()
    }

    fn want(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn names(pods: Vec<&Pod>) -> Vec<&str> {
        pods.into_iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or(""))
            .collect()
    }

    #[test]
    fn the_index_gives_the_pods_a_whole_read_gives_in_the_same_order() {
        let state = state_of(vec![
            pod_with("a", &[("app", "dns"), ("tier", "x")]),
            pod_with("b", &[("app", "web")]),
            pod_with("c", &[("app", "dns")]),
            pod_with("d", &[]),
            pod_with("e", &[("app", "dns"), ("tier", "x")]),
        ]);
        let pods = state.pods.get("pods").unwrap();
        let indexes = Indexes::new(&state);
        for wanted in [
            want(&[("app", "dns")]),
            want(&[("app", "dns"), ("tier", "x")]),
            want(&[("tier", "x"), ("app", "web")]),
            want(&[("app", "none")]),
            want(&[]),
        ] {
            let whole: Vec<&Pod> = pods.iter().filter(|p| carries(p, &wanted)).collect();
            assert_eq!(
                names(indexes.pods_labelled(pods, &wanted)),
                names(whole),
                "{wanted:?}"
            );
        }
        assert!(indexes.pods_by_label.get().is_some(), "the index was used");
        assert_eq!(
            names(indexes.pods_labelled(pods, &want(&[("app", "dns")]))),
            ["a", "c", "e"]
        );
    }

    #[test]
    fn a_list_that_is_not_the_states_is_read_whole_not_looked_up() {
        let state = state_of(vec![pod_with("a", &[("app", "dns")])]);
        let other = vec![pod_with("z", &[("app", "dns")])];
        let indexes = Indexes::new(&state);
        assert_eq!(
            names(indexes.pods_labelled(&other, &want(&[("app", "dns")]))),
            ["z"]
        );
        assert!(indexes.pods_by_label.get().is_none());
    }
}
