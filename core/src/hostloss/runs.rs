//! A controller's pods come one after another in a list (the API server lists by namespace
//! and name, and a controller's pods share its name as a prefix). What the model derives
//! from a pod's controller or template is therefore derived once per run of equal keys and
//! reused for the rest of the run.

/// The value derived for the last key, kept while the keys stay equal.
pub struct Runs<K, V> {
    last: Option<(K, V)>,
}

impl<K: PartialEq, V: Clone> Runs<K, V> {
    pub fn new() -> Runs<K, V> {
        Runs { last: None }
    }

    /// The value for `key`: the one kept when `key` equals the last key, else `derive`'s.
    pub fn get(&mut self, key: K, derive: impl FnOnce() -> V) -> V {
        match &self.last {
            Some((last, value)) if *last == key => value.clone(),
            _ => {
                let value = derive();
                self.last = Some((key, value.clone()));
                value
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_derived_once_per_run_of_equal_keys_and_again_when_a_key_returns() {
        let mut runs = Runs::new();
        let mut derived = Vec::new();
        let got: Vec<String> = ["a", "a", "b", "b", "b", "a"]
            .into_iter()
            .map(|key| {
                runs.get(key, || {
                    derived.push(key);
                    key.to_uppercase()
                })
            })
            .collect();
        assert_eq!(got, ["A", "A", "B", "B", "B", "A"]);
        assert_eq!(derived, ["a", "b", "a"]);
    }
}
