//! The trials on `fixtures/repo/talos-layouts`: nodes declared by the Talos configuration
//! alone, through talhelper's `talconfig.yaml` and through one file per node.

use std::collections::BTreeMap;

use super::tests::run_spec;
use crate::config::RepoSpec;
use crate::verdict::{Finding, Verdict};

fn trials(env_name: &str) -> BTreeMap<String, Finding> {
    run_spec(
        "talos-layouts",
        RepoSpec {
            environment: Some(env_name.into()),
            talos: BTreeMap::from([(env_name.into(), format!("talos/{env_name}"))]),
            ..RepoSpec::default()
        },
    )
}

#[test]
fn talhelper_nodes_are_the_declared_nodes_with_their_roles_labels_and_patches() {
    let t = trials("home");
    let cps = &t["gate1::home::repo::control-plane-nodes"];
    assert_eq!(cps.verdict, Verdict::Pass, "{cps:?}");
    assert!(
        cps.details()
            .contains("talos/home/talconfig.yaml:7: talhelper node[\"home-cp-1\"]"),
        "{cps:?}"
    );
    let hosts = &t["gate1::home::repo::distinct-hosts"];
    assert_eq!(hosts.verdict, Verdict::Fail, "{hosts:?}");
    assert!(
        hosts
            .details()
            .contains("control planes home-cp-2, home-cp-3 share host pve-b"),
        "{hosts:?}"
    );
    let schedulable = &t["gate1::home::repo::schedulable-control-plane"];
    assert_eq!(schedulable.verdict, Verdict::Pass, "{schedulable:?}");
    assert!(
        schedulable
            .details()
            .contains("talos/home/talconfig.yaml:5"),
        "{schedulable:?}"
    );
    let vip = &t["gate1::home::repo::vip"];
    assert_eq!(vip.verdict, Verdict::Pass, "{vip:?}");
}

#[test]
fn node_files_declare_their_nodes_by_hostname_and_their_role_by_directory() {
    let t = trials("lab");
    for trial in [
        "gate1::lab::repo::control-plane-nodes",
        "gate1::lab::repo::distinct-hosts",
        "gate1::lab::repo::schedulable-control-plane",
        "gate1::lab::repo::vip",
    ] {
        assert_eq!(t[trial].verdict, Verdict::Pass, "{trial}: {:?}", t[trial]);
    }
    let hosts = t["gate1::lab::repo::distinct-hosts"].details();
    assert!(
        hosts.contains("talos/lab/controlplane/lab-cp-1.yaml:7: Talos node file[\"lab-cp-1\"]"),
        "{hosts}"
    );
}
