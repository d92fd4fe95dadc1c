//! The run's Talos connections: one per control-plane endpoint, dialled on first use and
//! dropped after a failure so the next sample dials again. The etcd probe and the API VIP
//! watcher share one pool, so a run loads the talosconfig once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use gates_infra::talos::{TalosClient, TalosError, TalosNode};
use tokio::sync::Mutex;

/// Why a control plane's Talos API gave no usable answer: said as an observation or as why a
/// split-brain signal could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TalosAskError {
    /// The connection or the call failed.
    #[error(transparent)]
    Talos(#[from] TalosError),
    /// The etcd member answered, but follows no leader.
    #[error("{endpoint}: no leader")]
    NoLeader { endpoint: String },
    #[error("{endpoint}: no answer within {:.1}s", .patience.as_secs_f64())]
    NoAnswer {
        endpoint: String,
        patience: Duration,
    },
}

#[derive(Clone)]
pub struct TalosPool {
    client: TalosClient,
    nodes: Arc<Mutex<HashMap<String, TalosNode>>>,
}

impl TalosPool {
    pub fn new(client: TalosClient) -> TalosPool {
        TalosPool {
            client,
            nodes: Arc::default(),
        }
    }

    /// `call` on the endpoint's node within `patience`, so one slow node is named instead of
    /// a whole sample timing out.
    pub async fn ask<T, F, Fut>(
        &self,
        endpoint: &str,
        patience: Duration,
        call: F,
    ) -> Result<T, TalosAskError>
    where
        F: FnOnce(TalosNode) -> Fut,
        Fut: Future<Output = Result<T, TalosAskError>>,
    {
        let attempt = async {
            let cached = self.nodes.lock().await.get(endpoint).cloned();
            let node = match cached {
                Some(node) => node,
                None => {
                    let node = self.client.connect(endpoint).await?;
                    self.nodes
                        .lock()
                        .await
                        .insert(endpoint.to_string(), node.clone());
                    node
                }
            };
            call(node).await
        };
        let result = tokio::time::timeout(patience, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(TalosAskError::NoAnswer {
                    endpoint: endpoint.to_string(),
                    patience,
                })
            });
        if result.is_err() {
            self.nodes.lock().await.remove(endpoint);
        }
        result
    }
}
