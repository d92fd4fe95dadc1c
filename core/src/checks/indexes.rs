//! What several trials of one evaluation look up in the same large list, built once per
//! evaluation on first use. Ten controller trials each looking for their pods among a large
//! cluster's 100,000 used to read every pod ten times; they now share an index of the pods by
//! label value, one per label key they ask for, and read only the pods that carry their
//! labels.
//!
//! When the evaluation knows beforehand which label pairs its trials will ask for (the
//! controllers' selectors), the first trial to ask reads the pods once for all of them,
//! split over the cores, and keeps only the pods carrying a pair asked for: at 100,000 pods
//! that is one pass instead of one per key, and no index of values nobody asks for.
//!
//! `gates watch` evaluates again after every change, and a change replaces a pod or two of
//! 100,000: there the pairs' index is [kept](Kept) from one evaluation to the next and
//! brought up to date by the pods that differ, found by pointer (the state shares every
//! unchanged pod with the one before), instead of a read of every pod's labels.
//!
//! An index only narrows: every check still applies its whole filter to what the index
//! gives, so a finding is the same with or without it (a test compares both on every
//! fixture).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::meta::labels;
use crate::state::{Pod, State};

mod kept;
pub use kept::Kept;

/// The lazily built indexes over one state.
pub struct Indexes<'a> {
    state: &'a State,
    /// Off, every lookup reads its list whole: what the index is compared with.
    enabled: bool,
    pods_by_label: PodsByLabel,
    /// The pairs' index kept from the evaluation before, brought up to this state's pods.
    kept: Option<&'a Kept>,
}

impl<'a> Indexes<'a> {
    pub fn new(state: &'a State) -> Indexes<'a> {
        Indexes {
            state,
            enabled: true,
            pods_by_label: PodsByLabel::default(),
            kept: None,
        }
    }

    /// The indexes, answering the pairs `kept` indexes from it once it is brought up to
    /// this state's pods (which it is, here) instead of reading the pods.
    pub fn kept(mut self, kept: &'a mut Kept) -> Indexes<'a> {
        kept.refresh(self.state.pods.present().map_or(&[], Vec::as_slice));
        self.kept = Some(kept);
        self
    }

    /// The indexes, told which label selectors the trials will ask for the pods of (each
    /// selector's first pair is looked up; a selector not told is still answered).
    pub fn expecting<'s>(
        mut self,
        selectors: impl IntoIterator<Item = &'s BTreeMap<String, String>>,
    ) -> Indexes<'a> {
        ask(&mut self.pods_by_label.expected, selectors);
        self
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
        pods: &'p [Arc<Pod>],
        wanted: &BTreeMap<String, String>,
    ) -> Vec<&'p Pod> {
        let indexed = self.state.pods.get("pods").ok();
        if !self.enabled
            || wanted.is_empty()
            || !indexed.is_some_and(|all| std::ptr::eq(all.as_slice(), pods))
        {
            // Not the state's list (a check's own subset): read it whole.
            return pods
                .iter()
                .map(|p| &**p)
                .filter(|p| carries(p, wanted))
                .collect();
        }
        if let Some(kept) = self.kept
            && let Some((key, value)) = wanted.iter().next()
            && kept.indexes(key, value)
        {
            return positions(pods, kept.pairs().get(key), value, wanted);
        }
        self.pods_by_label.carrying(pods, wanted)
    }
}

/// The pods at the positions the pairs' index gives for `key`'s `value`, checked against
/// every pair of `wanted`.
fn positions<'p>(
    pods: &'p [Arc<Pod>],
    by_value: Option<&KeyIndex>,
    value: &str,
    wanted: &BTreeMap<String, String>,
) -> Vec<&'p Pod> {
    by_value
        .and_then(|by_value| by_value.get(value))
        .into_iter()
        .flatten()
        .map(|&i| &*pods[i as usize])
        .filter(|p| carries(p, wanted))
        .collect()
}

impl fmt::Debug for Indexes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Indexes")
            .field("enabled", &self.enabled)
            .finish()
    }
}

#[cfg(test)]
impl Indexes<'_> {
    fn keys_built(&self) -> usize {
        let keys = self.pods_by_label.keys.lock().unwrap();
        keys.values().filter(|slot| slot.get().is_some()).count()
    }
}

fn carries(pod: &Pod, wanted: &BTreeMap<String, String>) -> bool {
    let have = labels(&pod.metadata);
    wanted.iter().all(|(k, v)| have.get(k) == Some(v))
}

/// For each label key asked for, each of its values → the positions of the pods that carry
/// it, ascending; built the first time a trial asks for the key, so an evaluation reads the
/// pods once per distinct key its trials ask for (a handful), not once per trial, and trials
/// asking for different keys build theirs side by side.
#[derive(Default)]
struct PodsByLabel {
    keys: Mutex<HashMap<String, Arc<OnceLock<KeyIndex>>>>,
    /// The pairs the trials said they would ask for: key → values.
    expected: Asked,
    /// The pods carrying each expected pair, read in one pass on first use.
    pairs: OnceLock<Pairs>,
}

/// One key's values → the positions of the pods carrying each. Owned strings keep the index
/// free of borrows (a check's context stays covariant).
type KeyIndex = HashMap<String, Vec<u32>>;

impl PodsByLabel {
    fn key(&self, pods: &[Arc<Pod>], key: &str) -> Arc<OnceLock<KeyIndex>> {
        let slot = {
            let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            keys.entry(key.to_string()).or_default().clone()
        };
        slot.get_or_init(|| {
            let mut by_value: KeyIndex = HashMap::new();
            for (i, pod) in pods.iter().enumerate() {
                if let Some(value) = labels(&pod.metadata).get(key) {
                    match by_value.get_mut(value.as_str()) {
                        Some(list) => list.push(i as u32),
                        None => {
                            by_value.insert(value.clone(), vec![i as u32]);
                        }
                    }
                }
            }
            by_value
        });
        slot
    }

    /// The pods of `pods` (the list the index was built from) carrying every pair of
    /// `wanted` (not empty): those carrying its first pair, checked against every pair.
    fn carrying<'p>(
        &self,
        pods: &'p [Arc<Pod>],
        wanted: &BTreeMap<String, String>,
    ) -> Vec<&'p Pod> {
        let Some((key, value)) = wanted.iter().next() else {
            return pods.iter().map(|p| &**p).collect();
        };
        if asks(&self.expected, key, value) {
            let pairs = self.pairs.get_or_init(|| read_pairs(pods, &self.expected));
            return positions(pods, pairs.get(key), value, wanted);
        }
        let slot = self.key(pods, key);
        positions(pods, slot.get(), value, wanted)
    }
}

/// Each label key → each of its values → the positions of the pods carrying it, ascending.
type Pairs = HashMap<String, KeyIndex>;

/// The pairs the trials ask for the pods of: key → values.
type Asked = BTreeMap<String, BTreeSet<String>>;

/// Each selector's first pair (the one its pods are looked up by) put into `asked`.
fn ask<'s>(asked: &mut Asked, selectors: impl IntoIterator<Item = &'s BTreeMap<String, String>>) {
    for selector in selectors {
        if let Some((key, value)) = selector.iter().next() {
            asked.entry(key.clone()).or_default().insert(value.clone());
        }
    }
}

/// Whether `key: value` is one of the pairs asked for.
fn asks(asked: &Asked, key: &str, value: &str) -> bool {
    asked.get(key).is_some_and(|values| values.contains(value))
}

/// The positions of the pods carrying each pair of `expected`, ascending: the pods read once,
/// in as many slices as there are cores.
fn read_pairs(pods: &[Arc<Pod>], expected: &Asked) -> Pairs {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let slice = pods.len().div_ceil(threads.max(1)).max(1);
    let starts: Vec<usize> = (0..pods.len()).step_by(slice).collect();
    let parts = crate::side_by_side::map(&starts, |&start| {
        let mut found: Vec<(&str, &str, u32)> = Vec::new();
        let end = (start + slice).min(pods.len());
        for (i, pod) in pods[start..end].iter().enumerate() {
            let have = labels(&pod.metadata);
            for (key, values) in expected {
                if let Some(value) = have.get(key)
                    && values.contains(value)
                {
                    found.push((key, value, (start + i) as u32));
                }
            }
        }
        found
    });
    let mut pairs: Pairs = HashMap::new();
    // The slices in order: each pair's positions stay ascending.
    for (key, value, i) in parts.into_iter().flatten() {
        pairs
            .entry(key.to_string())
            .or_default()
            .entry(value.to_string())
            .or_default()
            .push(i);
    }
    pairs
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

    /// The index gives the pods a whole read of `pods` gives, in the same order.
    fn looked_up_as_read_whole(
        indexes: &Indexes<'_>,
        pods: &[Arc<Pod>],
        wanted: &BTreeMap<String, String>,
    ) {
        let whole: Vec<&Pod> = pods
            .iter()
            .map(|p| &**p)
            .filter(|p| carries(p, wanted))
            .collect();
        assert_eq!(
            names(indexes.pods_labelled(pods, wanted)),
            names(whole),
            "{wanted:?}"
        );
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
            looked_up_as_read_whole(&indexes, pods, &wanted);
        }
        // Every selector above begins with `app`: the pods were read for that key once.
        assert_eq!(indexes.keys_built(), 1);
        assert_eq!(
            names(indexes.pods_labelled(pods, &want(&[("app", "dns")]))),
            ["a", "c", "e"]
        );
    }

    #[test]
    fn a_list_that_is_not_the_states_is_read_whole_not_looked_up() {
        let state = state_of(vec![pod_with("a", &[("app", "dns")])]);
        let other = vec![Arc::new(pod_with("z", &[("app", "dns")]))];
        let indexes = Indexes::new(&state);
        assert_eq!(
            names(indexes.pods_labelled(&other, &want(&[("app", "dns")]))),
            ["z"]
        );
        assert_eq!(indexes.keys_built(), 0);
    }

    #[test]
    fn pairs_told_beforehand_are_read_in_one_pass_and_give_what_a_whole_read_gives() {
        let state = state_of(vec![
            pod_with("a", &[("app", "dns"), ("tier", "x")]),
            pod_with("b", &[("k8s-app", "web")]),
            pod_with("c", &[("app", "dns")]),
            pod_with("d", &[]),
            pod_with("e", &[("app", "dns"), ("tier", "x")]),
            pod_with("f", &[("k8s-app", "web"), ("app", "web")]),
        ]);
        let pods = state.pods.get("pods").unwrap();
        let told = [
            want(&[("app", "dns"), ("tier", "x")]),
            want(&[("k8s-app", "web")]),
        ];
        let indexes = Indexes::new(&state).expecting(&told);
        for wanted in told.iter().cloned().chain([
            want(&[("app", "dns")]),
            want(&[("app", "web")]),
            want(&[("app", "none")]),
        ]) {
            looked_up_as_read_whole(&indexes, pods, &wanted);
        }
        // `app: dns` was told; `app: web` and `app: none` were not, and read the key once.
        assert_eq!(indexes.keys_built(), 1);
        let pairs = indexes.pods_by_label.pairs.get().expect("read once");
        assert_eq!(pairs["app"]["dns"], [0, 2, 4]);
        assert_eq!(pairs["k8s-app"]["web"], [1, 5]);
        assert!(!pairs["app"].contains_key("web"), "only the pairs told");
    }
}
