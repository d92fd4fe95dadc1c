//! Builders for the chaos phases' unit tests.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use super::journal::{Entry, Journal, PlannedFault, PlannedVm};
use super::probes::Probe;
use super::timeline::Observation;
use crate::chaos::ChaosOptions;
use crate::config::{Budget, Environment};

/// An environment named `name` with a Proxmox section and `chaos: {chaos}`.
pub fn environment(name: &str, chaos: &str) -> Environment {
    let yaml = format!(
        "{{proxmox: {{url: 'https://127.0.0.1:1', fallback_urls: ['https://127.0.0.2:1'], token_id: 'gates@pve!chaos', token_secret_env: GATES_TEST_UNSET, insecure_tls: true}}, chaos: {{{chaos}}}}}"
    );
    let mut env: Environment = gates_core::yaml::from_str(&yaml).expect("test environment parses");
    env.name = name.to_string();
    env.file = PathBuf::from(format!("environments/{name}.yaml"));
    env
}

pub fn args() -> ChaosOptions {
    ChaosOptions {
        host: "auto".into(),
        dry_run: false,
        yes: false,
        whole_host: false,
        fault: crate::chaos::journal::FaultKind::Power,
        expect_failure: false,
        junit: None,
        reports: PathBuf::from("reports"),
        journal: None,
    }
}

pub fn vm(vmid: u32, name: &str) -> PlannedVm {
    PlannedVm {
        vmid,
        name: name.into(),
        host: "pve2".into(),
        node: name.into(),
        nets: Vec::new(),
    }
}

pub fn planned_fault(environment: &str) -> PlannedFault {
    PlannedFault {
        environment: environment.into(),
        host: "pve2".into(),
        vms: vec![vm(201, "talos-lab-cp-02"), vm(202, "talos-lab-w-02")],
        restore_by: Utc::now(),
        fault: crate::chaos::journal::FaultKind::Power,
        host_power: None,
        provenance: None,
    }
}

/// A journal at `path` for `planned_fault("lab")` that has asked Proxmox to stop VM 201 on
/// pve2 and recorded nothing after: it owes that VM's start.
pub fn journal_owing_a_start(path: &std::path::Path) {
    Journal::create(path, &planned_fault("lab"))
        .unwrap()
        .append(Entry::StopRequested {
            vmid: 201,
            host: "pve2".into(),
        })
        .unwrap();
}

pub fn budget(longest: u64, total: u64) -> Budget {
    Budget {
        longest: crate::config::Duration::from_secs(longest),
        total: crate::config::Duration::from_secs(total),
    }
}

/// A probe that answers what `answer` says for the time since `origin`.
pub fn probe(
    name: &str,
    budget: Budget,
    origin: tokio::time::Instant,
    answer: impl Fn(Duration) -> Observation + Send + Sync + 'static,
) -> Probe {
    let answer = Arc::new(answer);
    Probe {
        name: name.into(),
        what: format!("{name} for a test"),
        budget,
        sample: Arc::new(move || {
            let observation = answer(origin.elapsed());
            Box::pin(async move { observation })
        }),
    }
}
