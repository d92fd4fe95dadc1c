//! What several trials of one evaluation look up in the same large list, built once per
//! evaluation on first use. Ten controller trials each looking for their pods among a large
//! cluster's 100,000 used to read every pod ten times; they now share an index of the pods by
//! label value, one per label key they ask for, and read only the pods that carry their
//! labels.
//!
//! An index only narrows: every check still applies its whole filter to what the index
//! gives, so a finding is the same with or without it (a test compares both on every
//! fixture).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::meta::labels;
use crate::state::{Pod, State};

/// The lazily built indexes over one state.
pub struct Indexes<'a> {
    state: &'a State,
    /// Off, every lookup reads its list whole: what the index is compared with.
    enabled: bool,
    pods_by_label: PodsByLabel,
}

impl<'a> Indexes<'a> {
    pub fn new(state: &'a State) -> Indexes<'a> {
        Indexes {
            state,
            enabled: true,
            pods_by_label: PodsByLabel::default(),
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
        self.pods_by_label.carrying(pods, wanted)
    }
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
        let slot = self.key(pods, key);
        let Some(list) = slot.get().and_then(|by_value| by_value.get(value.as_str())) else {
            return Vec::new();
        };
        list.iter()
            .map(|&i| &*pods[i as usize])
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
            let whole: Vec<&Pod> = pods
                .iter()
                .map(|p| &**p)
                .filter(|p| carries(p, &wanted))
                .collect();
            assert_eq!(
                names(indexes.pods_labelled(pods, &wanted)),
                names(whole),
                "{wanted:?}"
            );
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
}
