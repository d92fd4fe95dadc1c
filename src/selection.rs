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

    #[test]
    fn a_selection_with_a_trial_left_is_fine() {
        assert!(nothing_left("staging", &Asked::default(), NAMES, 1).is_none());
    }
}
