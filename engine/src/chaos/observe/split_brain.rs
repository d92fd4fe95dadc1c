//! During a partition run, everything a split brain would show, sampled together every
//! interval until the run stops watching (after the links are back and the cluster
//! recovered): each control plane's Talos addresses (does it list the VIP?) and etcd status,
//! the etcd leader's status read again after every other member's, and the
//! `cilium-l2announce-*` Leases in kube-system. Judged in `judge/split_brain.rs`.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gates_infra::talos::holds_address;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::ListParams;
use tokio::sync::watch;
use tokio::time::Instant;

pub use crate::chaos::judge::split_brain::LeaseListError;
use crate::chaos::judge::split_brain::{BrainSample, EtcdSeen, LeaseSeen};
use crate::chaos::talos_pool::{TalosAskError, TalosPool};

/// The prefix of the Leases Cilium's L2 announcer takes, one per announced Service.
pub const L2_LEASE_PREFIX: &str = "cilium-l2announce-";

/// What to sample: each control-plane endpoint with its node, the VIP, the API.
pub struct BrainWatch {
    /// `None` when no Talos API can be read: nothing of the VIP or etcd is sampled.
    pub pool: Option<TalosPool>,
    /// (endpoint, node name)
    pub endpoints: Vec<(String, String)>,
    pub vip: Vec<IpAddr>,
    pub kube: kube::Client,
}

pub type BrainLog = Arc<Mutex<Vec<BrainSample>>>;

/// Sample every `interval` into `log` until `stop`.
pub async fn watch(
    w: BrainWatch,
    origin: Instant,
    interval: Duration,
    patience: Duration,
    log: BrainLog,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        let tick = Instant::now() + interval;
        let at = origin.elapsed();
        let (vip, etcd, leases) = tokio::join!(
            vip_holders(&w, patience),
            etcd_statuses(&w, patience),
            l2_leases(&w.kube, patience),
        );
        let leader_after = leader_again(&w, &etcd, patience).await;
        if let Ok(mut log) = log.lock() {
            log.push(BrainSample {
                at,
                vip,
                etcd,
                leader_after,
                leases,
            });
        }
        tokio::select! {
            _ = tokio::time::sleep_until(tick) => {}
            _ = stop.changed() => return,
        }
    }
}

async fn vip_holders(
    w: &BrainWatch,
    patience: Duration,
) -> Vec<(String, Result<bool, TalosAskError>)> {
    let (vip, Some(pool)) = (&w.vip, &w.pool) else {
        return Vec::new();
    };
    futures::future::join_all(w.endpoints.iter().map(|(endpoint, node)| async move {
        let holds = pool
            .ask(endpoint, patience, |talos| async move {
                let addresses = talos.addresses().await?;
                Ok(vip.iter().any(|ip| holds_address(&addresses, *ip)))
            })
            .await;
        (node.clone(), holds)
    }))
    .await
}

async fn etcd_status(
    pool: &TalosPool,
    endpoint: &str,
    patience: Duration,
) -> Result<EtcdSeen, TalosAskError> {
    pool.ask(endpoint, patience, |talos| async move {
        let s = talos.etcd_status().await?;
        Ok(EtcdSeen {
            member: s.member_id,
            leader: s.leader,
            raft_index: s.raft_index,
            raft_applied_index: s.raft_applied_index,
        })
    })
    .await
}

async fn etcd_statuses(
    w: &BrainWatch,
    patience: Duration,
) -> Vec<(String, Result<EtcdSeen, TalosAskError>)> {
    let Some(pool) = &w.pool else {
        return Vec::new();
    };
    futures::future::join_all(w.endpoints.iter().map(|(endpoint, node)| async move {
        (node.clone(), etcd_status(pool, endpoint, patience).await)
    }))
    .await
}

/// The status of the member most answers name leader, read once every other read is done:
/// an index a member applied above this one is one the leader never had.
async fn leader_again(
    w: &BrainWatch,
    etcd: &[(String, Result<EtcdSeen, TalosAskError>)],
    patience: Duration,
) -> Option<Result<EtcdSeen, TalosAskError>> {
    let mut votes: Vec<(u64, usize)> = Vec::new();
    for leader in etcd
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|s| s.leader))
    {
        match votes.iter_mut().find(|(l, _)| *l == leader) {
            Some(v) => v.1 += 1,
            None => votes.push((leader, 1)),
        }
    }
    let leader = votes.iter().max_by_key(|(_, n)| *n).map(|(l, _)| *l)?;
    let (i, _) = etcd
        .iter()
        .enumerate()
        .find(|(_, (_, r))| r.as_ref().is_ok_and(|s| s.member == leader))?;
    let endpoint = &w.endpoints.get(i)?.0;
    Some(etcd_status(w.pool.as_ref()?, endpoint, patience).await)
}

async fn l2_leases(
    kube: &kube::Client,
    patience: Duration,
) -> Result<Vec<LeaseSeen>, LeaseListError> {
    let api = Api::<Lease>::namespaced(kube.clone(), "kube-system");
    let list = tokio::time::timeout(patience, api.list(&ListParams::default()))
        .await
        .map_err(|_| LeaseListError::TookOver { patience })?
        .map_err(|e| LeaseListError::Api(Arc::new(e)))?;
    Ok(list
        .items
        .iter()
        .filter_map(|l| {
            let name = l.metadata.name.clone()?;
            if !name.starts_with(L2_LEASE_PREFIX) {
                return None;
            }
            let spec = l.spec.as_ref();
            Some(LeaseSeen {
                name,
                holder: spec
                    .and_then(|s| s.holder_identity.clone())
                    .unwrap_or_default(),
                acquired: spec.and_then(|s| s.acquire_time.as_ref()).and_then(utc),
                renewed: spec.and_then(|s| s.renew_time.as_ref()).and_then(utc),
            })
        })
        .collect())
}

fn utc(t: &MicroTime) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
}
