//! A selection that selects nothing is a mistake, not a green run: a filter with a typo,
//! an `--exact` name that is not quite a trial's, or a `--skip` that removes everything
//! would otherwise print "0 passed" and exit 0, which a pipeline reads as "the gates hold".
//! Such a run is refused (exit 2) with the trial names nearest to what was asked for.

/// What the user asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct Asked<'a> {
    pub filter: Option<&'a str>,
    pub exact: bool,
    pub skip: &'a [String],
}

impl Asked<'_> {
    /// Whether the trial called `name` is selected, as libtest selects a test: the filter is a
    /// substring of the name (the whole name with `--exact`), and no `--skip` is (or, with
    /// `--exact`, equals) it. The trials' names are what `--list` prints, so a name copied from
    /// there with `--exact` selects that trial alone.
    pub fn selects(&self, name: &str) -> bool {
        let matches = |pattern: &str| {
            if self.exact {
                name == pattern
            } else {
                name.contains(pattern)
            }
        };
        self.filter.is_none_or(matches) && !self.skip.iter().any(|skip| matches(skip))
    }
}

/// The message for a selection that left no trial, or `None` when some trial is left.
pub fn nothing_left(env: &str, asked: &Asked<'_>, all: &[&str], selected: usize) -> Option<String> {
    if selected > 0 {
        return None;
    }
    if all.is_empty() {
        return Some(format!(
            "no gate applies to {env}, so there is nothing to check: name {env} in a gate file's `environments`"
        ));
    }
    let mut what = Vec::new();
    if let Some(filter) = asked.filter {
        what.push(if asked.exact {
            format!("`{filter}` with --exact")
        } else {
            format!("the filter `{filter}`")
        });
    }
    for skip in asked.skip {
        what.push(format!("--skip `{skip}`"));
    }
    if what.is_empty() {
        what.push("the selection".to_string());
    }
    let nearest = match asked.filter {
        Some(filter) => nearest_names(filter, all, 5),
        None => all.iter().take(5).map(|n| n.to_string()).collect(),
    };
    Some(format!(
        "{} leaves no trial of the {} of {env}; nearest trial names:\n  {}",
        what.join(" and "),
        if all.len() == 1 {
            "1 trial".to_string()
        } else {
            format!("{} trials", all.len())
        },
        nearest.join("\n  ")
    ))
}

/// Up to `count` names, best first: a name is as near as its nearest `::` part or whole.
pub fn nearest_names(word: &str, names: &[&str], count: usize) -> Vec<String> {
    let mut scored: Vec<(f64, &str)> = names
        .iter()
        .map(|name| {
            let whole = strsim::jaro_winkler(word, name);
            let part = name
                .split("::")
                .map(|part| strsim::jaro_winkler(word, part))
                .fold(0.0, f64::max);
            (whole.max(part), *name)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(count)
        .map(|(_, name)| name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&str] = &[
        "gate1::staging::distinct-hosts",
        "gate1::staging::etcd-members",
        "gate2::staging::replicated-controller::coredns",
        "gate3::staging::external-traffic-policy",
    ];

    #[test]
    fn a_filter_with_a_typo_names_the_nearest_trials() {
        let message = nothing_left(
            "staging",
            &Asked {
                filter: Some("distnct-hosts"),
                ..Default::default()
            },
            NAMES,
            0,
        )
        .expect("nothing was selected");
        assert!(
            message.starts_with(
                "the filter `distnct-hosts` leaves no trial of the 4 trials of staging"
            ),
            "{message}"
        );
        let first = message.lines().nth(1).unwrap().trim();
        assert_eq!(first, "gate1::staging::distinct-hosts");
    }

    #[test]
    fn a_skip_that_removes_everything_is_named() {
        let skip = vec!["gate".to_string()];
        let message = nothing_left(
            "staging",
            &Asked {
                skip: &skip,
                ..Default::default()
            },
            NAMES,
            0,
        )
        .unwrap();
        assert!(
            message.starts_with("--skip `gate` leaves no trial"),
            "{message}"
        );
    }

    /// libtest-mimic's own filter is the oracle: gates selects what `--list` would print.
    #[test]
    fn trials_are_selected_exactly_as_libtest_selects_tests() {
        use libtest_mimic::{Arguments, Trial};
        let patterns = [
            None,
            Some("gate1"),
            Some("staging::distinct"),
            Some("gate1::staging::distinct-hosts"),
            Some("coredns"),
            Some(""),
            Some("nothing"),
        ];
        let skips: [&[&str]; 4] = [
            &[],
            &["gate2"],
            &["gate1::staging::etcd-members"],
            &["", "x"],
        ];
        let mut checked = 0;
        for filter in patterns {
            for skip in skips {
                for exact in [false, true] {
                    let skip: Vec<String> = skip.iter().map(|s| s.to_string()).collect();
                    let asked = Asked {
                        filter,
                        exact,
                        skip: &skip,
                    };
                    let args = Arguments {
                        filter: filter.map(str::to_string),
                        exact,
                        skip: skip.clone(),
                        ..Arguments::default()
                    };
                    for name in NAMES {
                        let libtest = !args.is_filtered_out(&Trial::test(*name, || Ok(())));
                        assert_eq!(asked.selects(name), libtest, "{name} with {asked:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 7 * 4 * 2 * NAMES.len());
    }

    #[test]
    fn a_selection_with_a_trial_left_is_fine() {
        assert!(nothing_left("staging", &Asked::default(), NAMES, 1).is_none());
    }
}
