//! Who holds the API VIP during a run, seen in the Talos addresses (COSI `AddressStatuses`) of
//! every control plane, each called directly. A change of holder goes onto the timeline: the
//! old holder dropping out (`cp-01 -> nobody`) and the new one taking over (`nobody -> cp-02`).

use std::net::IpAddr;
use std::time::Duration;

use gates_infra::talos::holds_address;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::chaos::events::Events;
use crate::chaos::talos_pool::TalosPool;

/// What to watch: each control-plane endpoint with the node it answers for, and the VIP.
pub struct VipWatch {
    pub pool: TalosPool,
    /// (endpoint, node name)
    pub endpoints: Vec<(String, String)>,
    pub vip: Vec<IpAddr>,
}

/// The nodes that hold the VIP in one sample; endpoints that did not answer hold nothing.
pub fn holders(answers: &[(String, Option<bool>)]) -> Vec<String> {
    answers
        .iter()
        .filter(|(_, holds)| *holds == Some(true))
        .map(|(node, _)| node.clone())
        .collect()
}

fn label(holders: &[String]) -> String {
    if holders.is_empty() {
        "nobody".to_string()
    } else {
        holders.join(" + ")
    }
}

/// Sample every `interval` until `stop`; each change of the holder set is an
/// `api-vip-holder-changed` event at the time it was seen.
pub async fn watch(
    w: VipWatch,
    origin: Instant,
    interval: Duration,
    patience: Duration,
    events: Events,
    mut stop: watch::Receiver<bool>,
) {
    let mut last: Option<Vec<String>> = None;
    loop {
        if *stop.borrow() {
            return;
        }
        let tick = Instant::now() + interval;
        let (vip, pool) = (&w.vip, &w.pool);
        let seen: Vec<(String, Option<bool>)> =
            futures::future::join_all(w.endpoints.iter().map(|(endpoint, node)| async move {
                let holds = pool
                    .ask(endpoint, patience, |talos| async move {
                        let addresses = talos.addresses().await?;
                        Ok(vip.iter().any(|ip| holds_address(&addresses, *ip)))
                    })
                    .await;
                (node.clone(), holds.ok())
            }))
            .await;
        let now = holders(&seen);
        if let Some(before) = &last
            && *before != now
        {
            events.push(
                origin.elapsed(),
                "api-vip-holder-changed",
                "api-vip",
                format!("{} -> {}", label(before), label(&now)),
            );
        }
        last = Some(now);
        tokio::select! {
            _ = tokio::time::sleep_until(tick) => {}
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nodes_that_answered_and_hold_the_vip_are_holders() {
        let answers = [
            ("cp-1".to_string(), None),
            ("cp-2".to_string(), Some(true)),
            ("cp-3".to_string(), Some(false)),
        ];
        assert_eq!(holders(&answers), vec!["cp-2"]);
        assert_eq!(label(&holders(&answers)), "cp-2");
        assert_eq!(label(&[]), "nobody");
        assert_eq!(label(&["a".into(), "b".into()]), "a + b");
    }
}
