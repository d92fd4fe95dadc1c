//! Every network phase of a collection (the Kubernetes lists, the Talos API, the API
//! endpoint, Proxmox, the cluster identity) finishes within the environment's `deadline`.
//! Per-request timeouts do not bound a phase: a server that drips one byte a second never
//! trips a read timeout, and a paged list makes many requests. A phase that runs out of
//! time gives `error` verdicts naming the phase and the deadline, never a hang.

use std::future::Future;
use std::time::Duration;

use crate::config::Environment;

/// The environment's deadline for one phase.
pub fn of(env: &Environment) -> Duration {
    env.deadline.into()
}

/// Why a phase was cut short, for the verdicts that needed it.
pub fn message(env: &Environment, phase: &str) -> String {
    format!(
        "{phase} did not finish within the deadline of {} (`deadline` in {}); the server may be overloaded or dripping",
        humantime::format_duration(of(env)),
        env.file.display()
    )
}

/// Run `work`, or give `on_timeout(message)` once the deadline has passed.
pub async fn within<T>(
    env: &Environment,
    phase: &str,
    work: impl Future<Output = T>,
    on_timeout: impl FnOnce(String) -> T,
) -> T {
    match tokio::time::timeout(of(env), work).await {
        Ok(value) => value,
        Err(_) => on_timeout(message(env, phase)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_phase_that_never_ends_is_cut_at_the_deadline_with_its_name() {
        let mut env = crate::checks::testing::env();
        env.deadline = crate::config::Duration::from_secs(3);
        let got: Option<String> = within(&env, "the Talos API", std::future::pending(), Some).await;
        let message = got.expect("cut at the deadline");
        assert!(
            message.starts_with("the Talos API did not finish within the deadline of 3s"),
            "{message}"
        );
    }
}
