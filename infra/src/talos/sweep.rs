//! Asking every endpoint at once, each on its own connection, with the answers in the order
//! of the endpoints; a task that dies leaves an `Unreachable` answer for its endpoint.

use std::future::Future;

use tokio::task::JoinSet;

use super::client::TalosClient;
use super::error::TalosError;

impl TalosClient {
    /// `ask(client, endpoint)` for every endpoint concurrently; `aborted` makes the answer of
    /// an endpoint whose task did not finish.
    pub(crate) async fn sweep<T, F, Fut>(
        &self,
        endpoints: &[String],
        ask: F,
        aborted: impl Fn(String, TalosError) -> T,
    ) -> Vec<T>
    where
        T: Send + 'static,
        F: Fn(TalosClient, String) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let mut set = JoinSet::new();
        for (index, endpoint) in endpoints.iter().enumerate() {
            let answer = ask(self.clone(), endpoint.clone());
            set.spawn(async move { (index, answer.await) });
        }
        let mut found: Vec<Option<T>> = std::iter::repeat_with(|| None)
            .take(endpoints.len())
            .collect();
        while let Some(joined) = set.join_next().await {
            if let Ok((index, answer)) = joined {
                found[index] = Some(answer);
            }
        }
        found
            .into_iter()
            .zip(endpoints)
            .map(|(answer, endpoint)| {
                answer.unwrap_or_else(|| {
                    let err = TalosError::Unreachable {
                        endpoint: endpoint.clone(),
                        detail: "the query task was aborted".into(),
                    };
                    aborted(endpoint.clone(), err)
                })
            })
            .collect()
    }
}
