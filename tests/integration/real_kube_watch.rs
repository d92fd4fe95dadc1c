//! `gates watch` against a real kube-apiserver: ready once every kind is listed, serving the
//! verdicts a one-shot check gives; a change made through the API reaches its metrics through
//! the watch; after etcd is compacted past every revision it saw and the API server restarts,
//! its watches get 410 Gone, it lists each kind again, and changes still arrive.

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject};

use crate::control_plane::{self, ControlPlane, Identity, Kubelets, Timing, load};
use crate::real_kube::{load_env, real_env_dir};
use crate::support::*;
use crate::watch::Watch;

const PLANE_SUBNET: u8 = 180;
const LAB_SUBNET: u8 = 182;
const COREDNS: &str = "gate2::lab::replicated-controller::coredns";
const PDB_READS: &str = "gates_watch_source_reads{source=\"poddisruptionbudgets.policy/v1\"}";

pub(crate) async fn pdbs(plane: &ControlPlane) -> Api<DynamicObject> {
    let client = plane.client(Identity::Admin).await.unwrap();
    let (resource, _) = load::api_resource(&client, "policy/v1", "PodDisruptionBudget")
        .await
        .unwrap();
    Api::namespaced_with(client, "kube-system", &resource)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_on_a_real_api_server_follows_changes_and_lists_again_after_compaction_and_a_restart()
 {
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let _one = control_plane::ONE_AT_A_TIME.lock().await;
    let timing = Timing::default();
    let mut plane = ControlPlane::start(&bin, PLANE_SUBNET, timing, Kubelets::Shared)
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    load::install_crds(&plane).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lab = start_lab("adr-007", LAB_SUBNET, dir.path()).await;
    load_env(&plane, &lab, 0).await;
    let envs = real_env_dir(&lab, &plane, Identity::Reader, dir.path(), None);
    let reports = dir.path().join("reports");
    let watch = Watch::start(&envs, &reports);

    let start = Instant::now();
    while watch.get("/readyz").await.0 != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "never ready: {}",
            watch.get("/readyz").await.1
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The served verdicts are a one-shot check's (the two read a moment apart, so a few
    // tries while the controllers settle).
    let mut agreed = false;
    let mut last = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let checked = crate::watch::checked_verdicts(&envs, &reports).await;
        let served = watch.verdicts().await;
        if served == checked {
            agreed = true;
            break;
        }
        last = (served, checked);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(agreed, "served {:?}\nchecked {:?}", last.0, last.1);
    assert_eq!(watch.metric(PDB_READS).await, Some(1.0));

    // A PDB deleted through the API: its trial fails through the watch.
    let api = pdbs(&plane).await;
    let mut pdb = api.get("coredns").await.expect("coredns's PDB is loaded");
    api.delete("coredns", &DeleteParams::default())
        .await
        .unwrap();
    watch
        .until_verdict(COREDNS, "fail", Duration::from_secs(20))
        .await;

    // etcd compacted past every revision the watch saw, then the API server restarted: the
    // watches cannot resume (410 Gone), every kind is listed again, changes still arrive.
    let compacted = plane.compact_etcd().await.unwrap();
    assert!(compacted > 0);
    plane.restart_apiserver(timing).await.unwrap();
    let start = Instant::now();
    while watch.metric(PDB_READS).await.unwrap_or_default() < 2.0 {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "no list after the restart: {}",
            watch.get("/metrics").await.1
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    pdb.metadata.resource_version = None;
    pdb.metadata.uid = None;
    pdb.metadata.creation_timestamp = None;
    pdb.metadata.managed_fields = None;
    api.create(&Default::default(), &pdb).await.unwrap();
    watch
        .until_verdict(COREDNS, "pass", Duration::from_secs(20))
        .await;
    assert_eq!(watch.get("/readyz").await.0, 200);

    let (code, said) = watch.terminate();
    assert_eq!(code, Some(0), "{said}");
    drop(lab);
}
