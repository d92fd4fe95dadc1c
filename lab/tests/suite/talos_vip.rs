//! The API VIP holder as the real gates Talos client sees it: COSI AddressStatuses read over
//! mutual TLS with the lab's talosconfig, on a running lab with sped-up world time. The lab
//! looks for a free subnet from 248 on.

use crate::common;

use std::net::IpAddr;
use std::time::Duration;

use gates_infra::RetryPolicy;
use gates_infra::talos::{
    EndpointAddresses, TalosClient, TalosError, TalosOptions, holds_address, load_context_from,
};

/// Endpoints (as the talosconfig lists them) whose addresses include `vip`.
fn holders(views: &[EndpointAddresses], vip: IpAddr) -> Vec<String> {
    views
        .iter()
        .filter(|v| v.holds(vip) == Some(true))
        .map(|v| v.endpoint.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_control_plane_holds_the_vip_and_it_moves_when_the_holder_stops() {
    // Speed 30: the 60 s VIP failover after a crash takes 2 s of real time.
    let (lab, _dir) = common::start("adr-007", 248, 30.0).await;
    let context = load_context_from(&lab.files.talosconfig, None).expect("talosconfig");
    let (env, env_name) = lab.shared.read(|w| {
        let e = w
            .envs
            .iter()
            .position(|e| e.name() == context.name)
            .expect("context names an environment");
        (e, w.envs[e].name().to_string())
    });
    let vip = IpAddr::V4(lab.plan.vip_ip(env));
    let client = TalosClient::from_context(
        &context,
        TalosOptions {
            connect_timeout: Duration::from_secs(2),
            call_timeout: Duration::from_secs(5),
            retry: RetryPolicy::NONE,
        },
    );
    let endpoints = context.endpoints.clone();
    assert!(endpoints.len() >= 3, "{env_name}: {endpoints:?}");

    // Every control plane answers; exactly one has the VIP, as a /32 on eth0.
    let views = client.addresses_of(&endpoints).await;
    for v in &views {
        let addrs = v.addresses.as_ref().unwrap_or_else(|e| panic!("{e}"));
        let own = format!("eth0/{}/24", v.endpoint);
        assert!(
            addrs.iter().any(|a| a.id == own),
            "{}: {addrs:?}",
            v.endpoint
        );
        assert!(addrs.iter().any(|a| a.id == "lo/127.0.0.1/8"));
    }
    let first = holders(&views, vip);
    assert_eq!(first.len(), 1, "holders of {vip}: {first:?}");
    let holder = first[0].clone();
    let node = client.connect(&holder).await.expect("connect");
    let addrs = node.addresses().await.expect("addresses");
    assert!(holds_address(&addrs, vip));
    let entry = addrs.iter().find(|a| a.address == vip).expect("vip");
    assert_eq!(
        (entry.id.as_str(), entry.link.as_str(), entry.prefix_len),
        (format!("eth0/{vip}/32").as_str(), "eth0", 32)
    );

    // The client agrees with the lab's ground truth.
    let (truth, vmid) = lab.shared.read(|w| {
        let h = w.envs[env].vip_holder.expect("a holder");
        (w.plan.node_ip(h).to_string(), w.nodes[h].vmid)
    });
    assert_eq!(holder, truth);

    // Power off the holder: its apid goes away, and after the failover another control plane
    // has the VIP (bounded wait in real time; the world runs 30 times faster).
    lab.shared.stop_vm(vmid).expect("stop the holder");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let moved = loop {
        let views = client.addresses_of(&endpoints).await;
        let now = holders(&views, vip);
        let old_down = views
            .iter()
            .find(|v| v.endpoint == holder)
            .is_some_and(|v| v.addresses.is_err());
        if old_down && now.len() == 1 {
            break (views, now[0].clone());
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no single new holder in time: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (views, new_holder) = moved;
    assert_ne!(new_holder, holder);
    let old = views.iter().find(|v| v.endpoint == holder).expect("old");
    assert!(
        matches!(
            old.addresses,
            Err(TalosError::Refused { .. } | TalosError::Timeout { .. })
        ),
        "{:?}",
        old.addresses
    );
    let truth = lab.shared.read(|w| {
        w.envs[env]
            .vip_holder
            .map(|h| w.plan.node_ip(h).to_string())
    });
    assert_eq!(truth.as_deref(), Some(new_holder.as_str()));
    lab.stop().await;
}
