//! Kubernetes label-selector semantics over a label map, with explanations.
//!
//! A [`Selector`] is compiled from a `LabelSelector` (`matchLabels` plus `matchExpressions` with
//! `In`, `NotIn`, `Exists`, `DoesNotExist`); all requirements must hold. An empty selector
//! matches everything. What a *nil* selector means depends on who holds it (Cilium: every node
//! or service; a PodDisruptionBudget: no pod), so the caller says it with [`WhenNil`].
//! For evidence, [`Selector::excluded_by`] names the requirements a label set fails.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use thiserror::Error;

/// A selector Kubernetes itself would reject.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SelectorError {
    #[error(
        "unknown operator {operator:?} for key {key:?} (expected In, NotIn, Exists or DoesNotExist)"
    )]
    UnknownOperator { key: String, operator: String },
    #[error("operator {operator} for key {key:?} needs at least one value")]
    MissingValues { key: String, operator: &'static str },
    #[error("operator {operator} for key {key:?} takes no values")]
    UnexpectedValues { key: String, operator: &'static str },
}

/// What a nil (absent) selector selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenNil {
    /// Cilium's node and service selectors.
    MatchesAll,
    /// A PodDisruptionBudget's selector (policy/v1).
    MatchesNothing,
}

/// One requirement a label set must meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// From `matchLabels`: the key is present with exactly this value.
    Equals {
        key: String,
        value: String,
    },
    /// The key is present with one of the values.
    In {
        key: String,
        values: BTreeSet<String>,
    },
    /// The key is absent, or present with none of the values.
    NotIn {
        key: String,
        values: BTreeSet<String>,
    },
    Exists {
        key: String,
    },
    DoesNotExist {
        key: String,
    },
}

impl Requirement {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals { key, value } => labels.get(key) == Some(value),
            Requirement::In { key, values } => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn { key, values } => {
                !labels.get(key).is_some_and(|v| values.contains(v))
            }
            Requirement::Exists { key } => labels.contains_key(key),
            Requirement::DoesNotExist { key } => !labels.contains_key(key),
        }
    }

    pub fn key(&self) -> &str {
        match self {
            Requirement::Equals { key, .. }
            | Requirement::In { key, .. }
            | Requirement::NotIn { key, .. }
            | Requirement::Exists { key }
            | Requirement::DoesNotExist { key } => key,
        }
    }
}

/// Reads like the YAML an operator wrote: `app=traefik`, `tier In (a, b)`,
/// `node-role.kubernetes.io/control-plane DoesNotExist`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list =
            |values: &BTreeSet<String>| values.iter().cloned().collect::<Vec<_>>().join(", ");
        match self {
            Requirement::Equals { key, value } => write!(f, "{key}={value}"),
            Requirement::In { key, values } => write!(f, "{key} In ({})", list(values)),
            Requirement::NotIn { key, values } => write!(f, "{key} NotIn ({})", list(values)),
            Requirement::Exists { key } => write!(f, "{key} Exists"),
            Requirement::DoesNotExist { key } => write!(f, "{key} DoesNotExist"),
        }
    }
}

/// A compiled label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// `None`: a nil selector that matches nothing.
    requirements: Option<Vec<Requirement>>,
}

impl Selector {
    /// Matches every label set.
    pub fn everything() -> Self {
        Selector {
            requirements: Some(Vec::new()),
        }
    }

    /// Matches no label set.
    pub fn nothing() -> Self {
        Selector { requirements: None }
    }

    /// Every pair must be present with that value (the `matchLabels` form, as in gate files).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        let requirements = labels
            .iter()
            .map(|(key, value)| Requirement::Equals {
                key: key.clone(),
                value: value.clone(),
            })
            .collect();
        Selector {
            requirements: Some(requirements),
        }
    }

    /// Compiles an optional `LabelSelector`; `nil` says what an absent one means.
    pub fn compile(selector: Option<&LabelSelector>, nil: WhenNil) -> Result<Self, SelectorError> {
        match selector {
            Some(selector) => Self::from_label_selector(selector),
            None => Ok(match nil {
                WhenNil::MatchesAll => Self::everything(),
                WhenNil::MatchesNothing => Self::nothing(),
            }),
        }
    }

    /// Compiles a present `LabelSelector`; an empty one matches everything.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements: Vec<Requirement> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(key, value)| Requirement::Equals {
                key: key.clone(),
                value: value.clone(),
            })
            .collect();
        for expr in selector.match_expressions.iter().flatten() {
            let key = expr.key.clone();
            let values: BTreeSet<String> = expr.values.iter().flatten().cloned().collect();
            let requirement = match expr.operator.as_str() {
                "In" | "NotIn" => {
                    let operator = if expr.operator == "In" { "In" } else { "NotIn" };
                    if values.is_empty() {
                        return Err(SelectorError::MissingValues { key, operator });
                    }
                    if operator == "In" {
                        Requirement::In { key, values }
                    } else {
                        Requirement::NotIn { key, values }
                    }
                }
                "Exists" | "DoesNotExist" => {
                    let exists = expr.operator == "Exists";
                    let operator = if exists { "Exists" } else { "DoesNotExist" };
                    if !values.is_empty() {
                        return Err(SelectorError::UnexpectedValues { key, operator });
                    }
                    if exists {
                        Requirement::Exists { key }
                    } else {
                        Requirement::DoesNotExist { key }
                    }
                }
                other => {
                    return Err(SelectorError::UnknownOperator {
                        key,
                        operator: other.to_string(),
                    });
                }
            };
            requirements.push(requirement);
        }
        Ok(Selector {
            requirements: Some(requirements),
        })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.requirements {
            None => false,
            Some(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// Matches every label set (an empty, non-nil selector).
    pub fn is_everything(&self) -> bool {
        self.requirements.as_ref().is_some_and(Vec::is_empty)
    }

    /// The requirements, or `None` for a nil selector that matches nothing.
    pub fn requirements(&self) -> Option<&[Requirement]> {
        self.requirements.as_deref()
    }

    /// Why `labels` is not selected: each failing requirement as text, e.g.
    /// `node-role.kubernetes.io/control-plane DoesNotExist`. Empty when it matches.
    pub fn excluded_by(&self, labels: &BTreeMap<String, String>) -> Vec<String> {
        match &self.requirements {
            None => vec!["a nil selector matches nothing".to_string()],
            Some(requirements) => requirements
                .iter()
                .filter(|r| !r.matches(labels))
                .map(|r| r.to_string())
                .collect(),
        }
    }
}

/// What a selector says of a label set known only in part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    Selected,
    /// A requirement on a known key fails: each such requirement as text.
    Excluded(Vec<String>),
    /// No known requirement fails, but these requirements are on keys whose presence or value
    /// is not known.
    Unknown(Vec<String>),
}

impl Selector {
    /// Like [`Selector::matches`] over labels of which only some keys are known: `known(key)`
    /// says whether a key absent from `labels` is known to be absent (present keys are known
    /// when `known` says so too; a present key with an unknown value is left out of `labels`
    /// and reported unknown). One failing known requirement excludes, whatever the unknown
    /// ones would say, since all requirements must hold.
    pub fn judge(&self, labels: &BTreeMap<String, String>, known: &dyn Fn(&str) -> bool) -> Judged {
        let Some(requirements) = &self.requirements else {
            return Judged::Excluded(vec!["a nil selector matches nothing".to_string()]);
        };
        let (decided, open): (Vec<&Requirement>, Vec<&Requirement>) =
            requirements.iter().partition(|r| known(r.key()));
        let failing: Vec<String> = decided
            .iter()
            .filter(|r| !r.matches(labels))
            .map(|r| r.to_string())
            .collect();
        if !failing.is_empty() {
            Judged::Excluded(failing)
        } else if !open.is_empty() {
            Judged::Unknown(open.iter().map(|r| r.to_string()).collect())
        } else {
            Judged::Selected
        }
    }
}

/// The requirements joined with commas; `<everything>` and `<nothing>` for the edge cases.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.requirements {
            None => f.write_str("<nothing>"),
            Some(requirements) if requirements.is_empty() => f.write_str("<everything>"),
            Some(requirements) => {
                let text: Vec<String> = requirements.iter().map(|r| r.to_string()).collect();
                f.write_str(&text.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: if values.is_empty() {
                None
            } else {
                Some(values.iter().map(|v| v.to_string()).collect())
            },
        }
    }

    fn compile(match_labels: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> Selector {
        let selector = LabelSelector {
            match_labels: if match_labels.is_empty() {
                None
            } else {
                Some(labels(match_labels))
            },
            match_expressions: if exprs.is_empty() { None } else { Some(exprs) },
        };
        Selector::from_label_selector(&selector).unwrap()
    }

    const CP: &str = "node-role.kubernetes.io/control-plane";

    #[test]
    fn match_labels_need_key_and_exact_value() {
        let s = compile(&[("app", "traefik")], vec![]);
        assert!(s.matches(&labels(&[("app", "traefik"), ("x", "y")])));
        assert!(!s.matches(&labels(&[("app", "traefk")])));
        assert!(!s.matches(&labels(&[])));
        assert_eq!(s.excluded_by(&labels(&[])), vec!["app=traefik"]);
        // An empty value still requires the key.
        let s = compile(&[(CP, "")], vec![]);
        assert!(s.matches(&labels(&[(CP, "")])));
        assert!(!s.matches(&labels(&[])));
    }

    #[test]
    fn in_and_not_in() {
        let s = compile(&[], vec![expr("zone", "In", &["pve1", "pve2"])]);
        assert!(s.matches(&labels(&[("zone", "pve2")])));
        assert!(!s.matches(&labels(&[("zone", "pve3")])));
        assert!(!s.matches(&labels(&[])));
        assert_eq!(s.excluded_by(&labels(&[])), vec!["zone In (pve1, pve2)"]);

        let s = compile(&[], vec![expr("zone", "NotIn", &["pve1"])]);
        assert!(s.matches(&labels(&[("zone", "pve2")])));
        assert!(!s.matches(&labels(&[("zone", "pve1")])));
        // NotIn is satisfied by a missing key, as in Kubernetes.
        assert!(s.matches(&labels(&[])));
    }

    #[test]
    fn exists_and_does_not_exist() {
        let s = compile(&[], vec![expr(CP, "DoesNotExist", &[])]);
        assert!(s.matches(&labels(&[("kubernetes.io/hostname", "w1")])));
        assert!(!s.matches(&labels(&[(CP, "")])));
        assert_eq!(
            s.excluded_by(&labels(&[(CP, "")])),
            vec!["node-role.kubernetes.io/control-plane DoesNotExist"]
        );
        let s = compile(&[], vec![expr(CP, "Exists", &[])]);
        assert!(s.matches(&labels(&[(CP, "")])));
        assert!(!s.matches(&labels(&[])));
    }

    #[test]
    fn all_requirements_must_hold_and_each_failure_is_named() {
        let s = compile(
            &[("app", "x")],
            vec![expr("tier", "In", &["web"]), expr(CP, "DoesNotExist", &[])],
        );
        assert!(s.matches(&labels(&[("app", "x"), ("tier", "web")])));
        let why = s.excluded_by(&labels(&[("app", "y"), (CP, "")]));
        assert_eq!(
            why,
            vec![
                "app=x".to_string(),
                "tier In (web)".into(),
                format!("{CP} DoesNotExist")
            ]
        );
        assert!(
            s.excluded_by(&labels(&[("app", "x"), ("tier", "web")]))
                .is_empty()
        );
        assert_eq!(
            s.to_string(),
            format!("app=x, tier In (web), {CP} DoesNotExist")
        );
    }

    #[test]
    fn empty_selector_matches_everything() {
        let s = Selector::from_label_selector(&LabelSelector::default()).unwrap();
        assert!(s.is_everything());
        assert!(s.matches(&labels(&[])));
        assert_eq!(s.to_string(), "<everything>");
    }

    #[test]
    fn nil_means_what_the_caller_says() {
        let all = Selector::compile(None, WhenNil::MatchesAll).unwrap();
        assert!(all.matches(&labels(&[])));
        let none = Selector::compile(None, WhenNil::MatchesNothing).unwrap();
        assert!(!none.matches(&labels(&[("app", "x")])));
        assert_eq!(
            none.excluded_by(&labels(&[])),
            vec!["a nil selector matches nothing"]
        );
        // A present empty selector is not nil.
        let empty = LabelSelector::default();
        assert!(
            Selector::compile(Some(&empty), WhenNil::MatchesNothing)
                .unwrap()
                .matches(&labels(&[]))
        );
    }

    #[test]
    fn invalid_selectors_are_errors() {
        let bad = |e| {
            Selector::from_label_selector(&LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![e]),
            })
            .unwrap_err()
        };
        let err = bad(expr("a", "Equals", &["b"]));
        assert_eq!(
            err,
            SelectorError::UnknownOperator {
                key: "a".into(),
                operator: "Equals".into()
            }
        );
        assert!(err.to_string().contains("unknown operator \"Equals\""));
        // Operators are case-sensitive in Kubernetes.
        assert!(matches!(
            bad(expr("a", "in", &["b"])),
            SelectorError::UnknownOperator { .. }
        ));
        assert!(matches!(
            bad(expr("a", "In", &[])),
            SelectorError::MissingValues { .. }
        ));
        assert!(matches!(
            bad(expr("a", "NotIn", &[])),
            SelectorError::MissingValues { .. }
        ));
        assert!(matches!(
            bad(expr("a", "Exists", &["b"])),
            SelectorError::UnexpectedValues { .. }
        ));
    }

    #[test]
    fn from_labels_is_match_labels() {
        let s = Selector::from_labels(&labels(&[("k8s-app", "kube-dns")]));
        assert!(s.matches(&labels(&[("k8s-app", "kube-dns")])));
        assert!(!s.matches(&labels(&[("k8s-app", "other")])));
        assert_eq!(s.to_string(), "k8s-app=kube-dns");
    }

    #[test]
    fn a_selector_on_a_key_nobody_knows_is_unknown_not_excluded() {
        let s = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(
                [
                    ("kubernetes.io/os".to_string(), "linux".to_string()),
                    ("gpu".to_string(), "yes".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        })
        .unwrap();
        let os = labels(&[("kubernetes.io/os", "linux")]);
        let known = |k: &str| k == "kubernetes.io/os";
        assert_eq!(
            s.judge(&os, &known),
            Judged::Unknown(vec!["gpu=yes".to_string()])
        );
        let everything_known = |_: &str| true;
        assert_eq!(
            s.judge(&os, &everything_known),
            Judged::Excluded(vec!["gpu=yes".to_string()])
        );
    }

    #[test]
    fn one_failing_known_requirement_excludes_whatever_the_unknown_ones_say() {
        let s = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(
                [
                    ("kubernetes.io/os".to_string(), "windows".to_string()),
                    ("gpu".to_string(), "yes".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        })
        .unwrap();
        let os = labels(&[("kubernetes.io/os", "linux")]);
        let known = |k: &str| k == "kubernetes.io/os";
        assert_eq!(
            s.judge(&os, &known),
            Judged::Excluded(vec!["kubernetes.io/os=windows".to_string()])
        );
        assert_eq!(Selector::everything().judge(&os, &known), Judged::Selected);
    }
}
