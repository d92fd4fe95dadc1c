//! `gates predict ENV`: read the environment once (live, or from `--snapshot` files), run the
//! host-loss model for every host (or one), for a power loss or (`--fault partition`) a
//! partition, print a table or JSON, and exit 0 when every host's loss is survivable, 1 when
//! one is not, 2 when it cannot tell.

use chrono::Utc;
use gates_core::exit::ExitCode;
use serde::Serialize;

use crate::cli::{FaultArg, Format, PredictArgs};
use crate::collect;
use crate::config::{Config, Environment};
use crate::error::AppError;
use crate::hostloss::{self, Fault, Input, Prediction};
use crate::state::State;
use crate::streams::Streams;
use gates_engine::predict::{over_fault, protected};

/// The prediction of one failure domain's loss; a domain that names nothing the environment
/// has is a usage error naming the setting, one whose nodes cannot be told is a prediction
/// that cannot tell.
fn over_domain(
    config: &Config,
    env: &Environment,
    state: &State,
    text: &str,
) -> Result<Prediction, AppError> {
    use gates_core::checks::failure_domains::{Domain, NotADomain};
    let domain = Domain::parse(text).map_err(|e| AppError::Usage(e.to_string()))?;
    let declared = env
        .proxmox
        .as_ref()
        .map(|p| p.hosts.clone())
        .unwrap_or_default();
    let Some(proxmox) = state.proxmox.present() else {
        return Ok(Prediction::cannot_tell(format!(
            "{domain}: Proxmox could not be read, so which nodes it carries is unknown"
        )));
    };
    let (nodes, name) = match domain.nodes(proxmox, &declared) {
        Ok(found) => found,
        Err(NotADomain::Unknown(why)) => return Ok(Prediction::cannot_tell(why)),
        Err(NotADomain::Named(why)) => {
            return Err(AppError::Usage(format!("--domain {text}: {why}")));
        }
    };
    let named = protected(config);
    Ok(hostloss::predict_nodes(
        Input {
            env,
            state,
            protected: &named,
            pause: &gates_core::pause::NEVER,
        },
        &name,
        &nodes,
    ))
}

#[derive(Serialize)]
struct Document<'a> {
    environment: &'a str,
    prediction: &'a Prediction,
}

pub async fn run(
    config: &Config,
    args: PredictArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env = config.environment(&args.env)?;
    let state = if args.snapshot.is_empty() {
        let state = collect::live(config, env).await;
        crate::output::notes::say_sources_down(&state, &env.name, streams);
        state
    } else {
        let snapshot = collect::snapshot::read(&args.snapshot, Utc::now())?;
        for note in &snapshot.notes {
            streams.say(format_args!("note: {note}"));
        }
        snapshot.state
    };
    let prediction = match &args.domain {
        None => {
            let fault = match args.fault {
                FaultArg::Power => Fault::Power,
                FaultArg::Partition => Fault::Partition,
            };
            over_fault(config, env, &state, args.host.as_deref(), fault)
        }
        Some(text) => over_domain(config, env, &state, text)?,
    };
    match args.format {
        Format::Json => {
            let doc = Document {
                environment: &env.name,
                prediction: &prediction,
            };
            let text = serde_json::to_string_pretty(&doc).map_err(|source| AppError::Encode {
                what: "the prediction",
                source,
            })?;
            streams.println(text);
        }
        Format::Pretty | Format::Terse => {
            streams.print(&hostloss::render::text(&prediction, &env.name))
        }
    }
    Ok(prediction.exit_code())
}
