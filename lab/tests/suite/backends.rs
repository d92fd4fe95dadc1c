//! The world seen through the Proxmox and Talos backend traits (what their servers serve).

use gates_lab::addr::Plan;
use gates_lab::clock::SimClock;
use gates_lab::proxmox::{ActionError, HostCommand, ProxmoxBackend, VmAction, VmStatus};
use gates_lab::resources::Res;
use gates_lab::scenario::Scenario;
use gates_lab::talos::{EtcdError, NodeRole, TalosBackend};
use gates_lab::world::backends::LabBackend;
use gates_lab::world::{Shared, World};
use std::time::Duration;

fn backend(name: &str) -> LabBackend {
    let s = Scenario::load(name).expect("scenario");
    let shared = Shared::new(World::build(&s, Plan::new(1), SimClock::new(1.0)).expect("builds"));
    tokio::spawn(shared.clone().drive());
    LabBackend { shared }
}

#[tokio::test(start_paused = true)]
async fn one_guest_looked_up_by_vmid_is_the_guest_the_list_shows_before_and_after_its_host_dies() {
    let b = backend("adr-007");
    let same_as_list = |b: &LabBackend| {
        for listed in b.vms() {
            assert_eq!(
                b.vm(listed.vmid),
                Some(listed.clone()),
                "VM {}",
                listed.vmid
            );
        }
    };
    same_as_list(&b);
    assert_eq!(b.vm(999), None);
    let host = b.vm(101).expect("101").node;
    b.host_power(&host, HostCommand::Shutdown)
        .expect("host shutdown");
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(b.vm(101).map(|v| v.status), Some(VmStatus::Unknown));
    same_as_list(&b);
}

#[tokio::test(start_paused = true)]
async fn proxmox_sees_hosts_vms_and_powers_them() {
    let b = backend("adr-007");
    let hosts = b.hosts();
    assert_eq!(hosts.len(), 5);
    let plan = b.shared.read(|w| w.plan);
    assert_eq!(hosts[2].ip, plan.host_ip(2));
    let vms = b.vms();
    assert_eq!(vms.len(), 6);
    let v = vms.iter().find(|v| v.vmid == 203).expect("203");
    assert_eq!(
        (v.node.as_str(), v.status, v.tags.clone()),
        (
            "pve5",
            VmStatus::Running,
            vec!["talos".to_string(), "production".to_string()]
        )
    );
    // The SMBIOS uuid is the node's systemUUID, lowercased.
    let cfg = b.vm_config(101).expect("config");
    let node = b
        .shared
        .read(|w| w.envs[0].store.get(Res::Nodes, "", "talos-lab-cp-01"))
        .expect("node");
    assert_eq!(
        cfg.smbios_uuid.map(|u| u.to_lowercase()).as_deref(),
        node["status"]["nodeInfo"]["systemUUID"].as_str()
    );
    assert!(b.vm_config(999).is_none());

    assert_eq!(
        b.vm_power(101, VmAction::Start),
        Err(ActionError::AlreadyRunning)
    );
    b.vm_power(101, VmAction::Shutdown).expect("shutdown");
    assert_eq!(
        b.vms().iter().find(|v| v.vmid == 101).map(|v| v.status),
        Some(VmStatus::Stopped)
    );
    assert!(
        b.vm_power(101, VmAction::Stop).is_ok(),
        "stopping a stopped guest is not an error"
    );

    b.host_power("pve2", HostCommand::Shutdown)
        .expect("host shutdown");
    tokio::time::sleep(Duration::from_secs(16)).await;
    let h = b.hosts();
    assert!(!h[1].online);
    assert_eq!(
        b.vms().iter().find(|v| v.vmid == 102).map(|v| v.status),
        Some(VmStatus::Unknown)
    );
    assert!(b.vm_power(102, VmAction::Start).is_err(), "its host is off");
    let mac = b.wake_on_lan("pve1", "pve2").expect("wol");
    assert_eq!(mac, "52:54:00:00:00:01");
    tokio::time::sleep(Duration::from_secs(91)).await;
    assert!(b.hosts()[1].online);
    b.vm_power(102, VmAction::Start).expect("start");
}

#[tokio::test(start_paused = true)]
async fn talos_sees_roles_etcd_and_quorum() {
    let b = backend("staging-today");
    let plan = b.shared.read(|w| w.plan);
    assert_eq!(
        b.resolve(&plan.node_ip(1).to_string()).as_deref(),
        Some("talos-test-worker-01")
    );
    assert_eq!(
        b.resolve("talos-test-cp-01").as_deref(),
        Some("talos-test-cp-01")
    );
    assert_eq!(b.resolve("10.0.0.1"), None);
    assert_eq!(b.role("talos-test-worker-01"), NodeRole::Worker);
    assert_eq!(b.version("talos-test-cp-01").tag, "v1.11.5");

    let b = backend("adr-007");
    let plan = b.shared.read(|w| w.plan);
    let members = b.etcd_members("talos-lab-cp-02").expect("members");
    assert_eq!(members.len(), 3);
    assert_eq!(
        members[0].peer_urls,
        vec![format!("https://{}:2380", plan.node_ip(0))]
    );
    let st = b.etcd_status("talos-lab-cp-02").expect("status");
    assert_ne!(st.leader, 0);
    assert!(
        b.services("talos-lab-cp-02")
            .iter()
            .any(|s| s.id == "etcd" && s.healthy == Some(true))
    );
    b.shared.power_loss_host("pve1").expect("pve1");
    assert!(!b.is_up("talos-lab-cp-01"));
    assert_eq!(
        b.etcd_members("talos-lab-cp-02").map(|m| m.len()),
        Ok(3),
        "the dead member stays listed"
    );
    b.shared.power_loss_host("pve2").expect("pve2");
    assert_eq!(b.etcd_members("talos-lab-cp-03"), Err(EtcdError::NoQuorum));
    assert_eq!(b.etcd_status("talos-lab-cp-03").map(|s| s.leader), Ok(0));
    assert!(
        b.services("talos-lab-cp-03")
            .iter()
            .any(|s| s.id == "etcd" && s.healthy == Some(false))
    );
}
