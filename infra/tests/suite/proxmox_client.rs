//! The Proxmox client against a loopback PVE stand-in over real TLS.

use std::time::Duration;

use crate::common::pki::{Ca, Leaf};
use crate::common::pve::{self, Pve, SECRET, State, TOKEN_ID, Vm};
use gates_infra::RetryPolicy;
use gates_infra::proxmox::{
    ApiToken, HaRequestedState, PowerOptions, ProxmoxClient, ProxmoxError, ProxmoxSettings,
    TaskOutcome, TlsTrust, TokenSecret, Upid, VmScope, certificate_fingerprint, collect_inventory,
};

const UUID1: &str = "6c3fa683-bef9-4425-b413-eaa45a9d6191";
const UUID2: &str = "7D4FB794-CF0A-4536-A524-FBB56B0E72A2";

fn state() -> State {
    let mut s = State::default();
    s.nodes = vec![
        ("pve1".into(), "AA:BB".into()),
        ("pve2".into(), "CC:DD".into()),
    ];
    s.task_polls = 1;
    for vm in [
        Vm::qemu(101, "cp1", "pve1", UUID1, "staging;cp"),
        Vm::qemu(102, "cp2", "pve2", UUID2, "staging"),
        Vm::qemu(
            201,
            "prod-cp1",
            "pve1",
            "11111111-2222-3333-4444-555555555555",
            "production",
        ),
    ] {
        s.vms.insert(vm.vmid, vm);
    }
    let mut ct = Vm::qemu(300, "ct", "pve1", UUID1, "staging");
    ct.kind = "lxc";
    s.vms.insert(300, ct);
    s
}

struct Setup {
    pve: Pve,
    ca: Ca,
    server: Leaf,
}

async fn setup(state: State) -> Setup {
    let ca = Ca::new("Proxmox Virtual Environment");
    let server = ca.server(&["127.0.0.1"], &["pve1"], false);
    let pve = pve::serve(&server, state).await;
    Setup { pve, ca, server }
}

fn token(secret: &str) -> ApiToken {
    ApiToken::new(TOKEN_ID, TokenSecret::new(secret).expect("secret")).expect("token")
}

fn client_with(url: String, trust: TlsTrust, secret: &str) -> ProxmoxClient {
    let mut settings = ProxmoxSettings::new(url, token(secret), trust);
    settings.retry = RetryPolicy::NONE;
    settings.request_timeout = Duration::from_secs(10);
    ProxmoxClient::new(settings).expect("client")
}

fn client(s: &Setup) -> ProxmoxClient {
    client_with(
        s.pve.url(),
        TlsTrust::ca_pem(s.ca.pem().into_bytes()).expect("ca"),
        SECRET,
    )
}

fn fast() -> PowerOptions {
    PowerOptions {
        task_deadline: Duration::from_secs(10),
        state_deadline: Duration::from_secs(10),
        poll_interval: Duration::from_millis(10),
    }
}

#[tokio::test]
async fn token_auth_and_inventory_over_ca_verified_tls() {
    let s = setup(state()).await;
    let c = client(&s);
    assert_eq!(c.version().await.expect("version").release, "9.2");

    let nodes = c.nodes().await.expect("nodes");
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.is_online()));

    let vms = c.cluster_vms().await.expect("vms");
    assert_eq!(
        vms.iter().map(|v| v.vmid).collect::<Vec<_>>(),
        vec![101, 102, 201],
        "LXC dropped"
    );

    let scope = VmScope {
        tags: vec!["Staging".into()],
        name_pattern: None,
    };
    let inv = collect_inventory(&c, &scope).await.expect("inventory");
    assert_eq!(
        inv.vms.iter().map(|v| v.vm.vmid).collect::<Vec<_>>(),
        vec![101, 102]
    );
    assert_eq!(inv.vms[0].smbios_uuid.as_deref(), Some(UUID1));
    assert_eq!(inv.vms[1].smbios_uuid.as_deref(), Some(UUID2));
    assert_eq!(inv.vms[1].host(), "pve2");
    assert!(inv.vms.iter().all(|v| v.config_error.is_none()));
    assert!(inv.ha_error.is_none());
    // Configs were read only for the scoped VMs.
    assert!(!s.pve.log().iter().any(|l| l.contains("/qemu/201/")));

    let by_name = VmScope {
        tags: vec![],
        name_pattern: Some("PROD-*".into()),
    };
    let inv = collect_inventory(&c, &by_name).await.expect("inventory");
    assert_eq!(
        inv.vms.iter().map(|v| v.vm.vmid).collect::<Vec<_>>(),
        vec![201]
    );
}

#[tokio::test]
async fn wrong_secret_is_unauthorized_with_the_reason_phrase() {
    let s = setup(state()).await;
    let c = client_with(
        s.pve.url(),
        TlsTrust::ca_pem(s.ca.pem().into_bytes()).expect("ca"),
        "00000000-wrong-secret",
    );
    let err = c.nodes().await.expect_err("401");
    match &err {
        ProxmoxError::Unauthorized { reason, .. } => assert_eq!(reason, "Authentication failed!"),
        other => panic!("unexpected {other:?}"),
    }
    // The header carried the token in the PVE form (the server saw and refused it).
    let refused = s.pve.with(|st| st.refused_auth.clone());
    assert_eq!(
        refused,
        vec![format!("PVEAPIToken={TOKEN_ID}=00000000-wrong-secret")]
    );
    assert!(!err.to_string().contains("wrong-secret"), "{err}");
}

#[tokio::test]
async fn down_node_is_595_with_reason_and_inventory_keeps_the_vm() {
    let mut st = state();
    st.down = vec!["pve2".into()];
    let s = setup(st).await;
    let c = client(&s);
    let err = c.vm_config("pve2", 102).await.expect_err("595");
    match &err {
        ProxmoxError::NodeUnreachable { status, reason, .. } => {
            assert_eq!(*status, 595);
            assert_eq!(reason, "No route to host");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.is_node_unreachable());
    let scope = VmScope {
        tags: vec!["staging".into()],
        name_pattern: None,
    };
    let inv = collect_inventory(&c, &scope)
        .await
        .expect("inventory still works");
    let vm102 = inv.vms.iter().find(|v| v.vm.vmid == 102).expect("kept");
    assert!(vm102.smbios_uuid.is_none());
    assert!(matches!(
        vm102.config_error,
        Some(ProxmoxError::NodeUnreachable { .. })
    ));
    assert_eq!(
        inv.vms
            .iter()
            .find(|v| v.vm.vmid == 101)
            .and_then(|v| v.smbios_uuid.as_deref()),
        Some(UUID1)
    );
}

#[tokio::test]
async fn missing_vm_is_not_found_from_the_500_message() {
    let s = setup(state()).await;
    let err = client(&s)
        .vm_status("pve1", 999)
        .await
        .expect_err("missing");
    match &err {
        ProxmoxError::NotFound { message, .. } => {
            assert!(message.contains("does not exist"), "{message}");
            assert!(!message.ends_with('\n'));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn unknown_path_is_not_implemented() {
    let s = setup(state()).await;
    let err = client(&s)
        .get::<serde_json::Value>(&["nodes", "pve1", "nonsense"], &[])
        .await
        .expect_err("501");
    assert!(
        matches!(err, ProxmoxError::NotImplemented { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn pinned_fingerprint_is_accepted_and_a_different_one_refused() {
    let s = setup(state()).await;
    let fp = certificate_fingerprint(&s.server.cert_der);
    // The pin replaces the CA: no CA configured, and the name is not checked.
    let url = s.pve.url().replace("127.0.0.1", "localhost");
    let ok = client_with(url.clone(), TlsTrust::fingerprint(&fp).expect("fp"), SECRET);
    ok.version().await.expect("pinned");

    let other = "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF";
    let bad = client_with(url, TlsTrust::fingerprint(other).expect("fp"), SECRET);
    match bad.version().await.expect_err("mismatch") {
        ProxmoxError::FingerprintMismatch { actual, .. } => assert_eq!(actual, fp),
        other => panic!("unexpected {other:?}"),
    }
    assert!(TlsTrust::fingerprint("AB:CD").is_err());
}

#[tokio::test]
async fn wrong_ca_and_wrong_name_are_told_apart() {
    let s = setup(state()).await;
    let stranger = Ca::new("Proxmox Virtual Environment");
    let c = client_with(
        s.pve.url(),
        TlsTrust::ca_pem(stranger.pem().into_bytes()).expect("ca"),
        SECRET,
    );
    let err = c.version().await.expect_err("unknown ca");
    assert!(matches!(err, ProxmoxError::UnknownCa { .. }), "{err:?}");

    let url = s.pve.url().replace("127.0.0.1", "localhost");
    let c = client_with(
        url,
        TlsTrust::ca_pem(s.ca.pem().into_bytes()).expect("ca"),
        SECRET,
    );
    let err = c.version().await.expect_err("name");
    assert!(matches!(err, ProxmoxError::NameMismatch { .. }), "{err:?}");

    let c = client_with(s.pve.url(), TlsTrust::Insecure, SECRET);
    c.version().await.expect("insecure accepts anything");
}

#[tokio::test]
async fn refused_connection_is_named() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let c = client_with(
        format!("https://127.0.0.1:{port}"),
        TlsTrust::Insecure,
        SECRET,
    );
    let err = c.version().await.expect_err("refused");
    assert!(matches!(err, ProxmoxError::Refused { .. }), "{err:?}");
}

#[tokio::test]
async fn secret_never_shows_in_debug_or_display() {
    let secret = TokenSecret::new(SECRET).expect("secret");
    assert!(!format!("{secret:?}").contains(SECRET));
    assert_eq!(secret.to_string(), "<redacted>");
    let t = token(SECRET);
    let shown = format!("{t:?}");
    assert!(
        !shown.contains(SECRET) && shown.contains(TOKEN_ID),
        "{shown}"
    );
    let settings = ProxmoxSettings::new("https://127.0.0.1:8006", t, TlsTrust::Insecure);
    assert!(!format!("{settings:?}").contains(SECRET));
    let c = ProxmoxClient::new(settings).expect("client");
    assert!(!format!("{c:?}").contains(SECRET), "{c:?}");

    // From a file, first line, trimmed; a missing file names the file, not a secret.
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("proxmox-token");
    std::fs::write(&file, format!("{SECRET}\n")).expect("write");
    assert_eq!(TokenSecret::from_file(&file).expect("file"), secret);
    let err = TokenSecret::from_file(&dir.path().join("nope")).expect_err("missing");
    assert!(err.to_string().contains("nope"), "{err}");
    let err = TokenSecret::from_env("GATES_TEST_SURELY_UNSET_VARIABLE").expect_err("unset");
    assert!(err.to_string().contains("not set"), "{err}");

    assert!(ApiToken::new("gates@pve", TokenSecret::new("x").expect("s")).is_err());
    assert!(ApiToken::new("gates@pve!1x", TokenSecret::new("x").expect("s")).is_err());
}

#[tokio::test]
async fn stop_follows_the_upid_until_ok_and_confirms_the_state() {
    let mut st = state();
    st.task_polls = 3;
    let s = setup(st).await;
    let c = client(&s);
    let report = c.stop_vm(101, &fast()).await.expect("stop");
    assert_eq!(report.final_status, "stopped");
    assert_eq!(report.task, Some(TaskOutcome::Ok));
    assert!(!report.ha_managed && !report.already_in_state);
    let upid = report.upid.expect("upid");
    assert_eq!(upid.kind, "qmstop");
    assert_eq!(upid.node, "pve1");
    assert_eq!(upid.user, TOKEN_ID);
    // Polled on the UPID's node, several times, then the real state was read.
    let log = s.pve.log();
    let polls = log
        .iter()
        .filter(|l| l.starts_with("GET /api2/json/nodes/pve1/tasks/"))
        .count();
    assert_eq!(polls, 4, "{log:?}");
    assert!(
        log.iter()
            .any(|l| l == "POST /api2/json/nodes/pve1/qemu/101/status/stop")
    );
    assert_eq!(
        c.vm_status("pve1", 101).await.expect("status").status,
        "stopped"
    );

    // And back.
    let report = c.start_vm(101, &fast()).await.expect("start");
    assert_eq!(report.final_status, "running");
    assert_eq!(report.upid.expect("upid").kind, "qmstart");
}

#[tokio::test]
async fn failed_task_reports_its_exit_status() {
    let mut st = state();
    st.fail_next_task =
        Some("can't lock file '/var/lock/qemu-server/lock-102.conf' - got timeout".into());
    let s = setup(st).await;
    let err = client(&s).stop_vm(102, &fast()).await.expect_err("fails");
    match err {
        ProxmoxError::TaskFailed { exitstatus, upid } => {
            assert!(exitstatus.contains("can't lock file"), "{exitstatus}");
            assert!(upid.starts_with("UPID:pve2:"), "{upid}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn warnings_are_success() {
    let mut st = state();
    st.fail_next_task = Some("WARNINGS: 1".into());
    let s = setup(st).await;
    let c = client(&s);
    let upid = c.vm_power_task("pve1", 101, "stop").await.expect("upid");
    let outcome = c
        .wait_task(&upid, Duration::from_secs(5), Duration::from_millis(5))
        .await
        .expect("ok");
    assert_eq!(outcome, TaskOutcome::Warnings("WARNINGS: 1".into()));
}

#[tokio::test]
async fn task_that_never_ends_hits_the_deadline() {
    let mut st = state();
    st.tasks_hang = true;
    let s = setup(st).await;
    let c = client(&s);
    let upid = c.vm_power_task("pve1", 101, "stop").await.expect("upid");
    let err = c
        .wait_task(&upid, Duration::from_millis(200), Duration::from_millis(20))
        .await
        .expect_err("deadline");
    assert!(matches!(err, ProxmoxError::TaskTimeout { .. }), "{err:?}");
}

#[tokio::test]
async fn starting_a_running_vm_sends_nothing() {
    let s = setup(state()).await;
    let report = client(&s).start_vm(102, &fast()).await.expect("start");
    assert!(report.already_in_state);
    assert!(report.upid.is_none());
    assert!(!s.pve.log().iter().any(|l| l.starts_with("POST")));
}

#[tokio::test]
async fn ha_stop_is_a_request_and_the_real_state_is_awaited() {
    let mut st = state();
    st.ha_delay_polls = 3;
    if let Some(vm) = st.vms.get_mut(&102) {
        vm.ha = Some("started".into());
    }
    let s = setup(st).await;
    let c = client(&s);
    let report = c.stop_vm(102, &fast()).await.expect("stop");
    assert!(report.ha_managed);
    assert_eq!(
        report.upid.as_ref().map(|u| u.kind.as_str()),
        Some("hastop")
    );
    assert_eq!(report.task, Some(TaskOutcome::Ok));
    assert_eq!(report.final_status, "stopped");
    // HA now wants it stopped: it will not come back by itself.
    assert_eq!(report.ha_requested_state, Some(HaRequestedState::Stopped));
    // The task ended before the VM was down; status was polled until it was.
    let status_polls = s
        .pve
        .log()
        .iter()
        .filter(|l| l.ends_with("/qemu/102/status/current"))
        .count();
    assert!(status_polls >= 4, "{status_polls}");

    let report = c.start_vm(102, &fast()).await.expect("start");
    assert_eq!(report.final_status, "running");
    assert_eq!(report.ha_requested_state, Some(HaRequestedState::Started));
}

#[tokio::test]
async fn state_deadline_is_reported_with_the_last_state() {
    let mut st = state();
    st.ha_delay_polls = 1000;
    if let Some(vm) = st.vms.get_mut(&101) {
        vm.ha = Some("started".into());
    }
    let s = setup(st).await;
    let options = PowerOptions {
        state_deadline: Duration::from_millis(150),
        ..fast()
    };
    match client(&s)
        .stop_vm(101, &options)
        .await
        .expect_err("deadline")
    {
        ProxmoxError::StateTimeout {
            vmid, wanted, last, ..
        } => {
            assert_eq!(
                (vmid, wanted.as_str(), last.as_str()),
                (101, "stopped", "running")
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn unknown_vm_is_reported() {
    let s = setup(state()).await;
    let err = client(&s)
        .stop_vm(4242, &fast())
        .await
        .expect_err("unknown");
    assert!(
        matches!(err, ProxmoxError::VmNotFound { vmid: 4242 }),
        "{err:?}"
    );
}

#[test]
fn upid_parse_is_public() {
    let u = Upid::parse("UPID:pve1:000039C6:1FE23176:619510B1:qmstop:101:gates@pve!lab:")
        .expect("upid");
    assert_eq!(
        (u.node.as_str(), u.kind.as_str(), u.id.as_str()),
        ("pve1", "qmstop", "101")
    );
}

#[tokio::test]
async fn forbidden_is_named_and_ha_denial_does_not_break_the_inventory() {
    let mut st = state();
    st.forbidden = vec!["cluster/ha/resources".into(), "nodes".into()];
    let s = setup(st).await;
    let c = client(&s);
    match c.nodes().await.expect_err("403") {
        ProxmoxError::Forbidden { message, .. } => {
            assert!(message.contains("Permission check failed"), "{message}")
        }
        other => panic!("unexpected {other:?}"),
    }
    s.pve
        .with(|st| st.forbidden = vec!["cluster/ha/resources".into()]);
    let inv = collect_inventory(&c, &VmScope::default())
        .await
        .expect("inventory");
    assert!(matches!(inv.ha_error, Some(ProxmoxError::Forbidden { .. })));
    assert_eq!(inv.vms.len(), 3);
}

#[tokio::test]
async fn expired_server_certificate_is_reported() {
    let ca = Ca::new("Proxmox Virtual Environment");
    let server = ca.server(&["127.0.0.1"], &[], true);
    let pve = pve::serve(&server, state()).await;
    let c = client_with(
        pve.url(),
        TlsTrust::ca_pem(ca.pem().into_bytes()).expect("ca"),
        SECRET,
    );
    let err = c.version().await.expect_err("expired");
    assert!(
        matches!(err, ProxmoxError::CertificateExpired { .. }),
        "{err:?}"
    );
}

/// Forwards to `target`, but drops the first `drops` connections at once, like a
/// keep-alive connection the server closed under us.
async fn flaky_proxy(target: std::net::SocketAddr, drops: usize) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut seen = 0;
        while let Ok((mut inbound, _)) = listener.accept().await {
            seen += 1;
            if seen <= drops {
                drop(inbound);
                continue;
            }
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn reads_are_retried_after_a_dropped_connection_but_only_boundedly() {
    let s = setup(state()).await;
    let trust = TlsTrust::ca_pem(s.ca.pem().into_bytes()).expect("ca");
    let retry = RetryPolicy {
        attempts: 2,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(5),
    };
    let make = |addr: std::net::SocketAddr| {
        let mut settings =
            ProxmoxSettings::new(format!("https://{addr}"), token(SECRET), trust.clone());
        settings.retry = retry;
        ProxmoxClient::new(settings).expect("client")
    };
    let once = flaky_proxy(s.pve.addr, 1).await;
    assert_eq!(
        make(once).version().await.expect("second attempt").release,
        "9.2"
    );

    let twice = flaky_proxy(s.pve.addr, 2).await;
    let err = make(twice).version().await.expect_err("attempts used up");
    assert!(err.is_retryable(), "{err:?}");
}

#[tokio::test]
async fn url_may_carry_the_api_prefix_but_must_be_https() {
    let s = setup(state()).await;
    let trust = TlsTrust::ca_pem(s.ca.pem().into_bytes()).expect("ca");
    let c = client_with(format!("{}/api2/json/", s.pve.url()), trust.clone(), SECRET);
    c.version().await.expect("prefix tolerated");
    assert!(
        s.pve.log().iter().all(|l| l == "GET /api2/json/version"),
        "{:?}",
        s.pve.log()
    );
    let plain = ProxmoxSettings::new(format!("http://{}", s.pve.addr), token(SECRET), trust);
    assert!(matches!(
        ProxmoxClient::new(plain),
        Err(ProxmoxError::InvalidSettings { .. })
    ));
}

#[tokio::test]
async fn older_servers_message_in_the_reason_phrase_is_used() {
    let mut st = state();
    st.legacy_errors = true;
    let s = setup(st).await;
    match client(&s)
        .vm_status("pve1", 999)
        .await
        .expect_err("missing")
    {
        ProxmoxError::NotFound { message, .. } => {
            assert_eq!(
                message,
                "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"
            )
        }
        other => panic!("unexpected {other:?}"),
    }
}
