//! A check's verdicts as a `wgpolicyk8s.io/v1alpha2` `ClusterPolicyReport` in the cluster
//! checked (opt-in, `--policy-report`), where Policy Reporter and other dashboards of policy
//! results already look. One report per environment, `gates-ENV`, written by server-side apply
//! with the field manager `gates`, so each run replaces the last run's results in place. Each
//! trial is one result: the policy is the decision's gate (`adr-007/gate2`), the rule the trial,
//! the category the gate's title; gates' verdicts map one to one onto the report's results
//! (pass, fail, error, skip). The shape follows the v1alpha2 types as Kyverno ships them
//! (`api/policyreport/v1alpha2/common.go`, docs/reality.md).
//!
//! `gates check` writes it once per run ([`apply`]); `gates watch` keeps a [`Writer`] and writes
//! again after each evaluation that changed a verdict or a message (`watch::policy_report`).
//! Both render the report with [`render`], so the two cannot drift apart.

use chrono::{DateTime, Utc};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::config::Environment;
use crate::record::CheckRecord;
use crate::runner::TrialResult;
use gates_core::verdict::Verdict;

/// The report's API group, version and kind.
pub const GROUP: &str = "wgpolicyk8s.io";
pub const VERSION: &str = "v1alpha2";
pub const KIND: &str = "ClusterPolicyReport";
const PLURAL: &str = "clusterpolicyreports";
/// The field manager of every write, so a run's apply owns (and replaces) its results.
pub const FIELD_MANAGER: &str = "gates";

/// Why the report could not be written: each names the fix.
#[derive(Debug, thiserror::Error)]
pub enum PolicyReportError {
    #[error("the Kubernetes API of {env} cannot be used to write the policy report: {reason}")]
    Client { env: String, reason: String },
    #[error(
        "ClusterPolicyReport {name}: the API does not serve {GROUP}/{VERSION} clusterpolicyreports: install the PolicyReport CRDs (Policy Reporter's or Kyverno's chart ships them), or leave out --policy-report"
    )]
    NotServed { name: String },
    #[error(
        "ClusterPolicyReport {name}: forbidden ({message}): bind deploy/rbac/gates-policy-reports.yaml to the identity of the kubeconfig"
    )]
    Forbidden { name: String, message: String },
    #[error("ClusterPolicyReport {name}: the API refused it: {message}")]
    Refused { name: String, message: String },
}

/// `gates-ENV`, lowercased, with what a name cannot hold turned into `-` (a DNS subdomain).
pub fn name(environment: &str) -> String {
    let cleaned: String = environment
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = format!("gates-{}", cleaned.trim_matches(['-', '.']));
    name.chars().take(253).collect()
}

/// The labels of the objects each trial judges, by trial name (`CheckSpec::subject_labels`):
/// a result's `resourceSelector`. A trial not here is about the cluster, the report's scope.
pub type Subjects = std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>;

/// Each live trial's subject labels, for the environment's trials.
pub fn subjects(config: &crate::config::Config, env: &Environment) -> Subjects {
    crate::runner::trials(config, env)
        .into_iter()
        .filter_map(|spec| {
            let labels = spec.check.subject_labels(env)?;
            Some((spec.name, labels))
        })
        .collect()
}

/// The report of one run (or one evaluation of a watch), as the object server-side apply is
/// given; `at` is when its results were found, each result's `timestamp`.
pub fn render(record: &CheckRecord, subjects: &Subjects, at: DateTime<Utc>) -> Value {
    let results: Vec<Value> = record
        .trials
        .iter()
        .map(|t| result(record, t, subjects.get(&t.name), at))
        .collect();
    let t = &record.tally;
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {
            "name": name(&record.environment),
            "labels": {
                "app.kubernetes.io/managed-by": "gates",
                "gates.environment": label_value(&record.environment),
            },
        },
        "summary": {
            "pass": t.passed,
            "fail": t.failed,
            "warn": 0,
            "error": t.errors,
            "skip": t.skipped,
        },
        "results": results,
    })
}

fn result(
    record: &CheckRecord,
    trial: &TrialResult,
    labels: Option<&std::collections::BTreeMap<String, String>>,
    at: DateTime<Utc>,
) -> Value {
    let title = record
        .gates
        .iter()
        .find(|g| g.gate == trial.gate)
        .map(|g| g.title.as_str())
        .unwrap_or("");
    let mut properties = serde_json::Map::new();
    properties.insert("environment".into(), json!(record.environment));
    properties.insert("gate".into(), json!(trial.gate.to_string()));
    properties.insert("kind".into(), json!(trial.kind));
    if let Some(instance) = &trial.instance {
        properties.insert("instance".into(), json!(instance));
    }
    let mut result = json!({
        "source": "gates",
        "policy": format!("{}/gate{}", record.decision, trial.gate),
        "rule": trial.name,
        "category": title,
        "result": verdict(trial.finding.verdict),
        "message": trial.finding.summary,
        "scored": true,
        "properties": properties,
        "timestamp": {"seconds": at.timestamp(), "nanos": 0},
    });
    if let Some(labels) = labels {
        result["resourceSelector"] = json!({ "matchLabels": labels });
    }
    result
}

/// gates' verdicts are the report's results of the same name.
fn verdict(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
        Verdict::Error => "error",
        Verdict::Skip => "skip",
    }
}

/// A label value: at most 63 of `[A-Za-z0-9._-]`, starting and ending alphanumeric.
fn label_value(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// Apply the run's report to the environment's cluster, replacing the last run's; the name
/// written.
pub async fn apply(
    config: &crate::config::Config,
    env: &Environment,
    record: &CheckRecord,
) -> Result<String, PolicyReportError> {
    Writer::new(config, env)
        .await?
        .write(record, record.started_at)
        .await
}

/// Writes one environment's report, as often as asked: the client and each trial's subject
/// labels are made once, since a watch writes many times over the same configuration.
pub struct Writer {
    api: Api<DynamicObject>,
    subjects: Subjects,
}

impl Writer {
    /// A writer for `env`'s cluster (building the client reads the kubeconfig; nothing is sent).
    pub async fn new(
        config: &crate::config::Config,
        env: &Environment,
    ) -> Result<Writer, PolicyReportError> {
        let client =
            crate::collect::kube::client(env)
                .await
                .map_err(|err| PolicyReportError::Client {
                    env: env.name.clone(),
                    reason: err.to_string(),
                })?;
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL);
        Ok(Writer {
            api: Api::all_with(client, &resource),
            subjects: subjects(config, env),
        })
    }

    /// Apply `record`'s report, its results found at `at`, replacing the last one written; the
    /// name written.
    pub async fn write(
        &self,
        record: &CheckRecord,
        at: DateTime<Utc>,
    ) -> Result<String, PolicyReportError> {
        let object = render(record, &self.subjects, at);
        let name = name(&record.environment);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match self.api.patch(&name, &params, &Patch::Apply(&object)).await {
            Ok(_) => Ok(name),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                Err(PolicyReportError::NotServed { name })
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                Err(PolicyReportError::Forbidden {
                    name,
                    message: status.message,
                })
            }
            Err(err) => Err(PolicyReportError::Refused {
                name,
                message: err.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_the_environment_made_a_dns_name() {
        assert_eq!(name("staging"), "gates-staging");
        assert_eq!(name("Lab_Production"), "gates-lab-production");
        assert_eq!(label_value("lab production!"), "lab-production");
    }

    #[test]
    fn each_verdict_is_the_result_of_the_same_name() {
        for (v, word) in [
            (Verdict::Pass, "pass"),
            (Verdict::Fail, "fail"),
            (Verdict::Error, "error"),
            (Verdict::Skip, "skip"),
        ] {
            assert_eq!(verdict(v), word);
        }
    }
}
