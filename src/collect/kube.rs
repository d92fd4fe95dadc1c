//! The live collector: lists every kind gates reads from the Kubernetes API with kube-rs,
//! once each, paged, all at the same time. Anything the cluster does not serve, or refuses,
//! is recorded as absent with the reason.

use std::path::{Path, PathBuf};

use chrono::Utc;
use futures::future::join_all;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::Value;

use super::kinds::Kind;
use super::raw::RawState;
use crate::config::Environment;
use crate::state::{Source, State};

/// Objects per page: large enough to keep round trips few, small enough for big clusters.
const PAGE_SIZE: u32 = 500;

/// Build a client for the environment's kubeconfig and context.
pub async fn client(env: &Environment) -> Result<Client, String> {
    let options = KubeConfigOptions {
        context: env.kube.context.clone(),
        cluster: None,
        user: None,
    };
    let kubeconfig = match &env.kube.kubeconfig {
        Some(path) => {
            let path = resolve(&env.file, path);
            Kubeconfig::read_from(&path)
                .map_err(|err| format!("cannot read kubeconfig {}: {err}", path.display()))?
        }
        None => Kubeconfig::read().map_err(|err| {
            format!("cannot read the kubeconfig ($KUBECONFIG or ~/.kube/config): {err}; set kube.kubeconfig in {}", env.file.display())
        })?,
    };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|err| match &env.kube.context {
            Some(context) => format!("kubeconfig context `{context}`: {err}"),
            None => format!("kubeconfig: {err}"),
        })?;
    let timeout: std::time::Duration = env.kube.timeout.into();
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    Client::try_from(config).map_err(|err| format!("cannot build a Kubernetes client: {err}"))
}

/// Every kind's objects from the environment's cluster, listed concurrently; an error only
/// when no client can be built at all.
pub async fn collect_raw(
    env: &Environment,
) -> Result<Vec<(Kind, Result<Vec<Value>, String>)>, String> {
    let client = client(env).await?;
    // One deadline for the whole phase: kinds listed in time keep their objects.
    let deadline = tokio::time::Instant::now() + super::deadline::of(env);
    Ok(join_all(Kind::ALL.into_iter().map(|kind| {
        let client = client.clone();
        async move {
            let listed = tokio::time::timeout_at(deadline, list_all(client, kind))
                .await
                .unwrap_or_else(|_| {
                    Err(super::deadline::message(
                        env,
                        &format!("listing {}", kind.coordinates().resource_name()),
                    ))
                });
            (kind, listed)
        }
    }))
    .await)
}

/// Collect the state of an environment from its cluster.
pub async fn collect(env: &Environment) -> State {
    let context = env
        .kube
        .context
        .clone()
        .unwrap_or_else(|| "(current context)".to_string());
    let source = Source::Live { context };
    let mut raw = RawState::default();
    match collect_raw(env).await {
        Ok(results) => {
            for (kind, result) in results {
                match result {
                    Ok(items) => {
                        raw.mark_present(kind);
                        for item in items {
                            raw.push(kind, item);
                        }
                    }
                    Err(reason) => raw.mark_absent(kind, reason),
                }
            }
        }
        Err(reason) => {
            for kind in Kind::ALL {
                raw.mark_absent(kind, reason.clone());
            }
        }
    }
    raw.into_state(source, Utc::now())
}

/// Every object of one kind, following `continue` tokens, as JSON with apiVersion and kind
/// set (list items from the API server omit them).
pub async fn list_all(client: Client, kind: Kind) -> Result<Vec<Value>, String> {
    let c = kind.coordinates();
    let resource = ApiResource {
        group: c.group.to_string(),
        version: c.version.to_string(),
        api_version: c.api_version(),
        kind: c.kind.to_string(),
        plural: c.plural.to_string(),
    };
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE_SIZE);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = api.list(&params).await.map_err(|err| {
            let why = describe(kind, &err);
            if token.is_some() {
                // A later page failing leaves a partial list: the whole kind is unread.
                format!("{why} (a later page, after {} objects)", items.len())
            } else {
                why
            }
        })?;
        for object in page.items {
            let mut value = serde_json::to_value(object).map_err(|err| err.to_string())?;
            value["apiVersion"] = Value::from(c.api_version());
            value["kind"] = Value::from(c.kind);
            items.push(value);
        }
        match page.metadata.continue_ {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => return Ok(items),
        }
    }
}

fn describe(kind: Kind, err: &kube::Error) -> String {
    let name = kind.coordinates().resource_name();
    match err {
        kube::Error::Api(status) if status.code == 404 => {
            format!(
                "{} {name} ({})",
                super::completeness::NOT_SERVED,
                kind.absent_hint()
            )
        }
        kube::Error::Api(status) if status.code == 401 => {
            format!("listing {name}: unauthorized: the kubeconfig credentials were rejected")
        }
        kube::Error::Api(status) if status.code == 403 => {
            format!(
                "listing {name}: forbidden: {} ({})",
                status.message,
                kind.absent_hint()
            )
        }
        kube::Error::Api(status) => {
            format!("listing {name}: HTTP {}: {}", status.code, status.message)
        }
        other => format!(
            "cannot reach the Kubernetes API while listing {name}: {}",
            chain(other)
        ),
    }
}

/// An error and its causes on one line.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A path from an environment file, relative to that file's directory, with `~` expanded.
pub fn resolve(env_file: &Path, path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    if path.is_absolute() {
        return path.to_path_buf();
    }
    env_file
        .parent()
        .map_or_else(|| path.to_path_buf(), |dir| dir.join(path))
}
