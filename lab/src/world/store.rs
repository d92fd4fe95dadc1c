//! The object store of one environment's Kubernetes API: JSON objects per resource, a
//! resourceVersion counter like etcd's revision, a bounded event history so that watches can
//! resume from a list's resourceVersion, and a broadcast channel for live watches.

use crate::resources::Res;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use tokio::sync::broadcast;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub res: Res,
    pub etype: EventType,
    pub obj: Arc<Value>,
}

pub type Key = (String, String);

/// Events to replay and the receiver for what follows.
pub type Subscription = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

#[derive(Debug, Clone)]
pub struct Stored {
    pub rv: u64,
    pub obj: Arc<Value>,
}

/// How many past events a watch may resume from, unless the scenario says otherwise.
pub const HISTORY: usize = 50_000;

#[derive(Debug)]
pub struct Store {
    rv: u64,
    objs: HashMap<Res, BTreeMap<Key, Stored>>,
    history: VecDeque<Arc<Event>>,
    /// How many events the history keeps (etcd compaction, in events).
    capacity: usize,
    /// Events with rv at or below this are gone from history.
    floor: u64,
    tx: broadcast::Sender<Arc<Event>>,
}

/// A watch asked to resume from a resourceVersion older than the history holds.
#[derive(Debug)]
pub struct TooOld;

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

impl Store {
    pub fn new() -> Self {
        Self::with_history(HISTORY)
    }

    /// A store whose history keeps the last `capacity` events.
    pub fn with_history(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(16_384);
        Store {
            rv: 1,
            objs: HashMap::new(),
            history: VecDeque::new(),
            capacity,
            floor: 1,
            tx,
        }
    }

    pub fn rv(&self) -> u64 {
        self.rv
    }

    fn key_of(obj: &Value) -> Key {
        let s = |p: &str| {
            obj.pointer(p)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        (s("/metadata/namespace"), s("/metadata/name"))
    }

    /// Insert or replace; a no-op when nothing but the resourceVersion would change.
    pub fn put(&mut self, res: Res, mut obj: Value) {
        let key = Self::key_of(&obj);
        let map = self.objs.entry(res).or_default();
        let etype = match map.get(&key) {
            Some(old) => {
                set_rv(&mut obj, old.rv);
                if *old.obj == obj {
                    return;
                }
                EventType::Modified
            }
            None => EventType::Added,
        };
        self.rv += 1;
        set_rv(&mut obj, self.rv);
        let obj = Arc::new(obj);
        map.insert(
            key,
            Stored {
                rv: self.rv,
                obj: obj.clone(),
            },
        );
        self.emit(res, etype, obj);
    }

    pub fn delete(&mut self, res: Res, ns: &str, name: &str) -> bool {
        let Some(map) = self.objs.get_mut(&res) else {
            return false;
        };
        let Some(old) = map.remove(&(ns.to_string(), name.to_string())) else {
            return false;
        };
        self.rv += 1;
        let mut obj = (*old.obj).clone();
        set_rv(&mut obj, self.rv);
        self.emit(res, EventType::Deleted, Arc::new(obj));
        true
    }

    fn emit(&mut self, res: Res, etype: EventType, obj: Arc<Value>) {
        let ev = Arc::new(Event {
            rv: self.rv,
            res,
            etype,
            obj,
        });
        if self.history.len() >= self.capacity.max(1)
            && let Some(old) = self.history.pop_front()
        {
            self.floor = old.rv;
        }
        self.history.push_back(ev.clone());
        // No receivers is normal.
        let _ = self.tx.send(ev);
    }

    pub fn get(&self, res: Res, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objs
            .get(&res)?
            .get(&(ns.to_string(), name.to_string()))
            .map(|s| s.obj.clone())
    }

    /// All objects of a resource, ordered by (namespace, name), with the store's revision.
    pub fn list(&self, res: Res) -> Vec<(Key, Arc<Value>)> {
        self.objs
            .get(&res)
            .map(|m| m.iter().map(|(k, s)| (k.clone(), s.obj.clone())).collect())
            .unwrap_or_default()
    }

    /// The objects of a resource after `after` in (namespace, name) order, within namespace
    /// `ns` when given: a page starts where the last one ended, without walking the objects
    /// before it.
    pub fn range<'a>(
        &'a self,
        res: Res,
        ns: Option<&'a str>,
        after: Option<&Key>,
    ) -> impl Iterator<Item = (&'a Key, &'a Arc<Value>)> + 'a {
        use std::ops::Bound;
        let start = match (after, ns) {
            (Some(key), _) => Bound::Excluded(key.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        self.objs
            .get(&res)
            .into_iter()
            .flat_map(move |m| m.range((start.clone(), Bound::Unbounded)))
            .take_while(move |(k, _)| ns.is_none_or(|n| k.0 == n))
            .map(|(k, s)| (k, &s.obj))
    }

    /// All objects of a resource as they were at revision `at` (a list with
    /// `resourceVersionMatch=Exact`), rebuilt from the event history. `TooOld` when the history
    /// no longer reaches back that far, as etcd answers for a compacted revision.
    pub fn list_at(&self, res: Res, at: u64) -> Result<Vec<(Key, Arc<Value>)>, TooOld> {
        if at >= self.rv {
            return Ok(self.list(res));
        }
        if at < self.floor {
            return Err(TooOld);
        }
        // The last event of each key up to `at`, and the first one after it.
        let mut before: HashMap<Key, &Arc<Event>> = HashMap::new();
        let mut first_after: HashMap<Key, EventType> = HashMap::new();
        for ev in self.history.iter().filter(|e| e.res == res) {
            let key = Self::key_of(&ev.obj);
            if ev.rv <= at {
                before.insert(key, ev);
            } else {
                first_after.entry(key).or_insert(ev.etype);
            }
        }
        let mut state: BTreeMap<Key, Arc<Value>> = self.list(res).into_iter().collect();
        for (key, first) in first_after {
            match (before.get(&key), first) {
                (Some(ev), _) if ev.etype == EventType::Deleted => {
                    state.remove(&key);
                }
                (Some(ev), _) => {
                    state.insert(key, ev.obj.clone());
                }
                (None, EventType::Added) => {
                    state.remove(&key);
                }
                (None, EventType::Modified | EventType::Deleted) => return Err(TooOld),
            }
        }
        Ok(state.into_iter().collect())
    }

    pub fn keys(&self, res: Res) -> Vec<Key> {
        self.objs
            .get(&res)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub fn count(&self, res: Res) -> usize {
        self.objs.get(&res).map(|m| m.len()).unwrap_or(0)
    }

    /// Forget every past event: a watch or an exact list from any revision before now is
    /// answered 410 Gone (etcd compacted to the current revision).
    pub fn compact(&mut self) {
        self.history.clear();
        self.floor = self.rv;
    }

    /// Events after `since` (for resuming a watch) and a receiver for what follows. Called
    /// under the world lock, so nothing can slip between the replay and the subscription.
    pub fn subscribe(&self, since: u64) -> Result<Subscription, TooOld> {
        if since < self.floor {
            return Err(TooOld);
        }
        let replay = self
            .history
            .iter()
            .filter(|e| e.rv > since)
            .cloned()
            .collect();
        Ok((replay, self.tx.subscribe()))
    }
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, v: u32) -> Value {
        json!({"metadata": {"namespace": "a", "name": name}, "v": v})
    }

    #[test]
    fn an_exact_list_rebuilds_an_earlier_revision_until_it_is_compacted() {
        let mut s = Store::with_history(3);
        s.put(Res::Pods, pod("x", 1));
        let at = s.rv();
        s.put(Res::Pods, pod("x", 2));
        s.put(Res::Pods, pod("y", 1));
        let then = s.list_at(Res::Pods, at).expect("within the history");
        assert_eq!(then.len(), 1, "{then:?}");
        assert_eq!(then[0].1["v"], 1);
        assert_eq!(s.list_at(Res::Pods, s.rv()).expect("now").len(), 2);
        // A fourth event pushes the first out: that revision is compacted.
        s.delete(Res::Pods, "a", "y");
        assert!(s.list_at(Res::Pods, at).is_err());
    }

    #[test]
    fn unchanged_puts_do_not_bump_and_watch_resumes() {
        let mut s = Store::new();
        s.put(
            Res::Pods,
            json!({"metadata":{"namespace":"a","name":"p"},"x":1}),
        );
        let rv1 = s.rv();
        s.put(
            Res::Pods,
            json!({"metadata":{"namespace":"a","name":"p"},"x":1}),
        );
        assert_eq!(s.rv(), rv1);
        s.put(
            Res::Pods,
            json!({"metadata":{"namespace":"a","name":"p"},"x":2}),
        );
        assert_eq!(s.rv(), rv1 + 1);
        let (replay, _rx) = s.subscribe(rv1).expect("in history");
        assert_eq!(replay.len(), 1);
        assert_eq!(replay[0].etype, EventType::Modified);
        assert!(s.delete(Res::Pods, "a", "p"));
        assert!(s.get(Res::Pods, "a", "p").is_none());
    }
}
