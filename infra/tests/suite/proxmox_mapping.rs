//! VM ↔ Kubernetes node mapping and VM scoping (pure functions).

use gates_infra::proxmox::{
    ClusterVm, InventoryVm, KubeNodeIdentity, MappingError, MappingOptions, MatchedBy, VmScope,
    glob_match, map_nodes_to_vms,
};

fn vm(vmid: u32, name: &str, host: &str, uuid: Option<&str>, tags: &[&str]) -> InventoryVm {
    InventoryVm {
        vm: ClusterVm {
            vmid,
            name: Some(name.to_string()),
            node: host.to_string(),
            status: "running".into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            hastate: None,
            template: false,
            lock: None,
        },
        smbios_uuid: uuid.map(str::to_string),
        config_error: None,
        disks: Vec::new(),
        ha: None,
    }
}

fn node(name: &str, uuid: &str) -> KubeNodeIdentity {
    KubeNodeIdentity {
        name: name.into(),
        system_uuid: uuid.into(),
    }
}

const U1: &str = "6c3fa683-bef9-4425-b413-eaa45a9d6191";
const U2: &str = "7d4fb794-cf0a-4536-a524-fbb56b0e72a2";
const U3: &str = "8e50c8a5-d01b-4647-b635-0cc67c1f83b3";

#[test]
fn uuids_match_case_insensitively() {
    let vms = vec![
        vm(101, "talos-cp-a", "pve1", Some(&U1.to_uppercase()), &[]),
        vm(102, "talos-cp-b", "pve2", Some(U2), &[]),
    ];
    let nodes = vec![node("cp1", U1), node("cp2", &U2.to_uppercase())];
    let m = map_nodes_to_vms(&nodes, &vms, MappingOptions::default()).expect("map");
    let cp1 = m.placement("cp1").expect("cp1");
    assert_eq!(
        (cp1.vmid, cp1.host.as_str(), cp1.matched_by),
        (101, "pve1", MatchedBy::SystemUuid)
    );
    assert_eq!(cp1.uuid.as_deref(), Some(U1));
    assert_eq!(m.placement("cp2").expect("cp2").host, "pve2");
    assert!(m.unmatched.is_empty());
}

#[test]
fn duplicate_vm_uuids_are_refused() {
    let vms = vec![
        vm(101, "a", "pve1", Some(U1), &[]),
        vm(105, "a-restored", "pve3", Some(&U1.to_uppercase()), &[]),
    ];
    let err =
        map_nodes_to_vms(&[node("cp1", U1)], &vms, MappingOptions::default()).expect_err("dup");
    assert_eq!(
        err,
        MappingError::DuplicateVmUuid {
            uuid: U1.into(),
            vmids: vec![101, 105]
        }
    );
    assert!(err.to_string().contains("101, 105"), "{err}");
}

#[test]
fn duplicate_node_uuids_are_refused() {
    let vms = vec![vm(101, "a", "pve1", Some(U1), &[])];
    let err = map_nodes_to_vms(
        &[node("cp1", U1), node("cp2", &U1.to_uppercase())],
        &vms,
        MappingOptions::default(),
    )
    .expect_err("dup");
    assert!(
        matches!(err, MappingError::DuplicateNodeUuid { ref nodes, .. } if nodes == &vec!["cp1".to_string(), "cp2".to_string()])
    );
}

#[test]
fn name_fallback_only_when_allowed_and_never_steals_a_claimed_vm() {
    let vms = vec![
        vm(101, "cp1", "pve1", None, &[]),
        vm(102, "cp2", "pve2", Some(U2), &[]),
    ];
    // cp1 reports an empty UUID, "cp2-by-uuid" claims VM 102 whose name is "cp2".
    let nodes = vec![node("cp1", ""), node("cp2-by-uuid", U2), node("cp2", U3)];
    let strict = map_nodes_to_vms(&nodes, &vms, MappingOptions::default()).expect("map");
    assert_eq!(strict.unmatched, vec!["cp1".to_string(), "cp2".to_string()]);

    let loose = map_nodes_to_vms(
        &nodes,
        &vms,
        MappingOptions {
            allow_name_fallback: true,
        },
    )
    .expect("map");
    let cp1 = loose.placement("CP1".to_lowercase().as_str()).expect("cp1");
    assert_eq!((cp1.vmid, cp1.matched_by), (101, MatchedBy::Name));
    assert_eq!(loose.placement("cp2-by-uuid").expect("uuid").vmid, 102);
    assert_eq!(
        loose.unmatched,
        vec!["cp2".to_string()],
        "VM 102 is taken by UUID"
    );
}

#[test]
fn ambiguous_names_are_refused() {
    let vms = vec![
        vm(101, "cp1", "pve1", None, &[]),
        vm(111, "CP1", "pve2", None, &[]),
    ];
    let err = map_nodes_to_vms(
        &[node("cp1", "")],
        &vms,
        MappingOptions {
            allow_name_fallback: true,
        },
    )
    .expect_err("ambiguous");
    assert!(matches!(err, MappingError::AmbiguousName { .. }));
}

#[test]
fn zero_uuids_match_nothing() {
    let zero = "00000000-0000-0000-0000-000000000000";
    let vms = vec![
        vm(101, "x", "pve1", Some(zero), &[]),
        vm(102, "y", "pve1", Some(zero), &[]),
    ];
    let m = map_nodes_to_vms(&[node("cp1", zero)], &vms, MappingOptions::default())
        .expect("no dup error for zeros");
    assert_eq!(m.unmatched, vec!["cp1".to_string()]);
}

#[test]
fn scope_by_all_tags_and_name_glob() {
    let v = vm(101, "Talos-Staging-CP1", "pve1", None, &["staging", "cp"]).vm;
    assert!(VmScope::default().matches(&v));
    assert!(
        VmScope {
            tags: vec!["STAGING".into()],
            name_pattern: None
        }
        .matches(&v)
    );
    assert!(
        !VmScope {
            tags: vec!["staging".into(), "prod".into()],
            name_pattern: None
        }
        .matches(&v)
    );
    assert!(
        VmScope {
            tags: vec![],
            name_pattern: Some("talos-staging-*".into())
        }
        .matches(&v)
    );
    assert!(
        !VmScope {
            tags: vec!["staging".into()],
            name_pattern: Some("talos-prod-*".into())
        }
        .matches(&v)
    );
    assert!(glob_match("a*b?d", "axxbcd"));
    assert!(glob_match("*", ""));
    assert!(!glob_match("a?", "a"));
    assert!(!glob_match("ab", "abc"));
    assert!(glob_match("*cp*", "talos-cp-1"));
}
