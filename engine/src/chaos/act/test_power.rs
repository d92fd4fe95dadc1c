//! Test builders for the acting phases: a Proxmox client whose API refuses every connection,
//! a journal in a temporary directory, a two-VM target.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use gates_infra::RetryPolicy;
use gates_infra::proxmox::{ApiToken, ProxmoxClient, ProxmoxSettings, TlsTrust, TokenSecret};

use super::journal::Journal;
use super::power::Power;
use crate::chaos::clock::TestClock;
use crate::chaos::context::Ctx;
use crate::chaos::plan::Target;
use crate::chaos::plan::timings::Timings;
use crate::chaos::reporters::{Recorder, Reporters};
use crate::chaos::test_support::{environment, planned_fault, vm};
use crate::config::Environment;

pub struct CtxParts {
    pub env: Environment,
    pub clock: TestClock,
    pub recorder: Arc<Recorder>,
}

impl CtxParts {
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            env: &self.env,
            clock: &self.clock,
            out: Reporters::new().with(self.recorder.clone()),
            origin: tokio::time::Instant::now(),
        }
    }
}

pub fn ctx_parts() -> CtxParts {
    CtxParts {
        env: environment("lab", "allowed: true"),
        clock: TestClock::starting_at(Utc::now()),
        recorder: Arc::default(),
    }
}

pub fn timings() -> Timings {
    Timings::of(
        &gates_core::yaml::from_str("{sample_interval: 100ms}").unwrap(),
        false,
    )
}

pub fn target() -> Target {
    Target {
        host: "pve2".into(),
        reason: "named on the command line".into(),
        vms: vec![vm(201, "talos-lab-cp-02"), vm(202, "talos-lab-w-02")],
        bystanders: Vec::new(),
        whole_host: false,
        host_power: None,
        fault: crate::chaos::journal::FaultKind::Power,
    }
}

/// Power through an API nothing listens on, journaling into a fresh journal.
pub fn unreachable_power() -> (Power, PathBuf, tempfile::TempDir) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let token =
        ApiToken::new("gates@pve!chaos", TokenSecret::new("not-a-secret").unwrap()).unwrap();
    let mut settings = ProxmoxSettings::new(
        format!("https://127.0.0.1:{port}"),
        token,
        TlsTrust::Insecure,
    );
    settings.retry = RetryPolicy::NONE;
    settings.connect_timeout = std::time::Duration::from_secs(1);
    settings.request_timeout = std::time::Duration::from_secs(2);
    let client = ProxmoxClient::new(settings).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chaos-lab.journal");
    let journal = Journal::create(&path, &planned_fault("lab")).unwrap();
    let power = Power::new(client, std::time::Duration::from_millis(100), journal);
    (power, path, dir)
}
