//! Drift of the API VIP and the talosconfig endpoints, against the adr-007 repository's
//! staging (VIP 10.0.50.10, endpoints 10.0.50.11-13).

use std::net::IpAddr;

use crate::checks::testing::state;
use crate::state::{
    ApiState, Collected, EtcdMemberView, EtcdView, State, TalosEndpoint, TalosState,
};
use crate::verdict::Verdict;

use super::drift_addresses::endpoint_host;
use super::tests::{copy, fixture, run};

const VIP: &str = "gate1::staging::drift::vip";
const ENDPOINTS: &str = "gate1::staging::drift::talos-endpoints";

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Talos answering on `endpoints`, node `i` holding its own address and `extra[i]`.
fn talos(endpoints: &[&str], holder_extra: &[(usize, &str)]) -> TalosState {
    let members: Vec<EtcdMemberView> = (0..endpoints.len())
        .map(|i| EtcdMemberView {
            id: format!("{:016x}", i + 1),
            hostname: format!("talos-test-cp-0{}", i + 1),
            ..Default::default()
        })
        .collect();
    TalosState {
        talosconfig: "/home/ops/.talos/config".into(),
        context: "staging".into(),
        context_endpoints: endpoints.iter().map(|e| e.to_string()).collect(),
        endpoints: endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut addresses = vec![ip(e)];
                addresses.extend(
                    holder_extra
                        .iter()
                        .filter(|(n, _)| *n == i)
                        .map(|(_, a)| ip(a)),
                );
                TalosEndpoint {
                    endpoint: e.to_string(),
                    view: Ok(EtcdView {
                        members: members.clone(),
                        member_id: format!("{:016x}", i + 1),
                        ..Default::default()
                    }),
                    addresses: Ok(addresses),
                }
            })
            .collect(),
    }
}

fn live(vip: &str, talos_state: TalosState) -> State {
    state()
        .with(|s| {
            s.api = Collected::Present(ApiState {
                vip_endpoint: Some(format!("https://{vip}:6443")),
                vip_addresses: vec![ip(vip)],
                kubeconfig_server: Ok(format!("https://{vip}:6443")),
                readyz: Ok(()),
                readyz_status: Some(200),
            });
            s.talos = Collected::Present(talos_state);
        })
        .build()
}

const DECLARED: [&str; 3] = ["10.0.50.11", "10.0.50.12", "10.0.50.13"];

#[test]
fn the_live_vip_and_talosconfig_endpoints_agreeing_with_the_repository_pass() {
    let r = run(
        &fixture("adr-007"),
        &live("10.0.50.10", talos(&DECLARED, &[(1, "10.0.50.10")])),
    );
    let vip = &r[VIP];
    assert_eq!(vip.verdict, Verdict::Pass, "{vip:?}");
    let text = vip.details();
    assert!(
        text.contains(
            "talos/staging/controlplane.yaml:10: vip.ip: 10.0.50.10 (on talos-test-cp-01)"
        ),
        "{text}"
    );
    assert!(
        text.contains("live: 10.0.50.10 is held by talos-test-cp-02 (Talos node addresses)"),
        "{text}"
    );
    assert_eq!(r[ENDPOINTS].verdict, Verdict::Pass, "{:?}", r[ENDPOINTS]);
}

#[test]
fn a_live_vip_other_than_the_declared_one_fails_naming_both() {
    let r = run(
        &fixture("adr-007"),
        &live("10.0.50.9", talos(&DECLARED, &[])),
    );
    let vip = &r[VIP];
    assert_eq!(vip.verdict, Verdict::Fail, "{vip:?}");
    assert_eq!(
        vip.summary,
        "the API endpoint stands for 10.0.50.9, the repository declares the VIP 10.0.50.10"
    );
    let text = vip.details();
    assert!(
        text.contains("live: API endpoint https://10.0.50.9:6443: 10.0.50.9"),
        "{text}"
    );
    assert!(text.contains("live: 10.0.50.10 is held by none"), "{text}");
}

#[test]
fn a_talosconfig_listing_the_vip_instead_of_a_node_fails_naming_both_sides() {
    let r = run(
        &fixture("adr-007"),
        &live(
            "10.0.50.10",
            talos(&["10.0.50.10", "10.0.50.12", "10.0.50.13"], &[]),
        ),
    );
    let endpoints = &r[ENDPOINTS];
    assert_eq!(endpoints.verdict, Verdict::Fail, "{endpoints:?}");
    assert_eq!(
        endpoints.summary,
        "the talosconfig context lists 10.0.50.10 the repository does not declare and lacks 10.0.50.11 it does"
    );
    assert!(
        endpoints
            .details()
            .contains("live: talosconfig /home/ops/.talos/config context staging: 10.0.50.10, 10.0.50.12, 10.0.50.13"),
        "{endpoints:?}"
    );
}

#[test]
fn without_talos_or_an_api_section_the_address_drift_trials_skip_and_unread_ones_are_errors() {
    let r = run(&fixture("adr-007"), &state().build());
    assert_eq!(r[VIP].verdict, Verdict::Skip, "{:?}", r[VIP]);
    assert_eq!(r[ENDPOINTS].verdict, Verdict::Skip, "{:?}", r[ENDPOINTS]);
    let unread = state()
        .with(|s| {
            s.api = Collected::Absent("connection refused".into());
            s.talos = Collected::Absent("apid timed out".into());
        })
        .build();
    let r = run(&fixture("adr-007"), &unread);
    assert_eq!(r[VIP].verdict, Verdict::Error, "{:?}", r[VIP]);
    assert!(
        r[VIP].summary.contains("connection refused"),
        "{:?}",
        r[VIP]
    );
    assert_eq!(r[ENDPOINTS].verdict, Verdict::Error, "{:?}", r[ENDPOINTS]);
}

#[test]
fn a_declared_vip_that_is_not_an_address_is_an_error_at_its_line() {
    let dir = copy("adr-007");
    let file = dir.path().join("talos/staging/controlplane.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("ip: 10.0.50.10", "ip: api.staging")).unwrap();
    let r = run(dir.path(), &live("10.0.50.10", talos(&DECLARED, &[])));
    assert_eq!(r[VIP].verdict, Verdict::Error, "{:?}", r[VIP]);
    assert_eq!(
        r[VIP].summary,
        "talos/staging/controlplane.yaml:10: vip.ip: api.staging is not an IP address"
    );
}

#[test]
fn endpoint_hosts_drop_schemes_ports_and_brackets_but_keep_bare_ipv6() {
    for (endpoint, host) in [
        ("10.0.50.11", "10.0.50.11"),
        ("10.0.50.11:50000", "10.0.50.11"),
        ("https://cp.example:6443/", "cp.example"),
        ("[fd00::1]:50000", "fd00::1"),
        ("fd00::1", "fd00::1"),
    ] {
        assert_eq!(endpoint_host(endpoint), host, "{endpoint}");
    }
}

#[test]
fn a_talosconfig_endpoint_that_only_begins_like_the_vip_is_not_the_vip() {
    // 10.0.50.100 begins with the VIP 10.0.50.10 but is another address.
    let dir = copy("adr-007");
    let file = dir.path().join("terraform/environments/staging.tfvars");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "\"10.0.50.11\", \"10.0.50.12\"",
            "\"10.0.50.100\", \"10.0.50.12\"",
        ),
    )
    .unwrap();
    let r = run(dir.path(), &state().build());
    let endpoints = &r["gate1::staging::repo::talos-endpoints"];
    assert_eq!(endpoints.verdict, Verdict::Pass, "{endpoints:?}");
    std::fs::write(
        &file,
        text.replace(
            "\"10.0.50.11\", \"10.0.50.12\"",
            "\"10.0.50.10:50000\", \"10.0.50.12\"",
        ),
    )
    .unwrap();
    let r = run(dir.path(), &state().build());
    let endpoints = &r["gate1::staging::repo::talos-endpoints"];
    assert_eq!(endpoints.verdict, Verdict::Fail, "{endpoints:?}");
}
