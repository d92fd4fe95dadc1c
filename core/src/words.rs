//! How numbers and durations read in messages: "1 replica", "2 replicas"; a lease age of
//! `2d 1h` rather than `171876s`. Shared so every check says it the same way.

use std::time::Duration;

/// `1 replica`, `2 replicas`: a count with its noun, plural by adding `s`.
pub fn count(n: impl Into<i128>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A duration in its two largest units, as people say it: `2d 1h`, `5m 40s`, `15s`, `0s`.
pub fn duration(d: Duration) -> String {
    let mut left = d.as_secs();
    let units = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)];
    let mut parts = Vec::new();
    for (name, size) in units {
        if left >= size {
            parts.push(format!("{}{name}", left / size));
            left %= size;
        }
        if parts.len() == 2 {
            break;
        }
    }
    if parts.is_empty() {
        return "0s".to_string();
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_everything_else_plural() {
        assert_eq!(count(1, "replica"), "1 replica");
        assert_eq!(count(0, "replica"), "0 replicas");
        assert_eq!(count(3u32, "disruption"), "3 disruptions");
    }

    #[test]
    fn durations_read_in_their_two_largest_units() {
        assert_eq!(duration(Duration::from_secs(171_876)), "1d 23h");
        assert_eq!(
            duration(Duration::from_secs(2 * 86_400 + 3_600 + 59)),
            "2d 1h"
        );
        assert_eq!(duration(Duration::from_secs(340)), "5m 40s");
        assert_eq!(duration(Duration::from_secs(15)), "15s");
        assert_eq!(duration(Duration::ZERO), "0s");
    }
}
