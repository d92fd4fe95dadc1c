//! The power (and link) requests a chaos run sent, as its report lists them: what "no manual
//! work" compares with the plan.

use serde::{Deserialize, Serialize};

/// What a request asked Proxmox to do. A retry is counted apart from the first attempt, so
/// the plan's one stop and one start can be told from the retries of a slow start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerAction {
    Stop,
    Start,
    StartRetry,
    HostShutdown,
    HostWake,
    LinkDown,
    LinkUp,
    LinkUpRetry,
}

impl PowerAction {
    /// The word the report and the evidence use (`start-retry`).
    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::Stop => "stop",
            PowerAction::Start => "start",
            PowerAction::StartRetry => "start-retry",
            PowerAction::HostShutdown => "host-shutdown",
            PowerAction::HostWake => "host-wake",
            PowerAction::LinkDown => "link-down",
            PowerAction::LinkUp => "link-up",
            PowerAction::LinkUpRetry => "link-up-retry",
        }
    }
}

impl std::fmt::Display for PowerAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One power request the harness sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    pub action: PowerAction,
    /// The VM, for VM actions; none for host actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u32>,
    #[serde(default)]
    pub host: String,
    /// The network device, for a partition's link actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// `ok`, or the error.
    #[serde(default)]
    pub result: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_is_written_as_the_word_it_reads_back_from() {
        let all = [
            PowerAction::Stop,
            PowerAction::Start,
            PowerAction::StartRetry,
            PowerAction::HostShutdown,
            PowerAction::HostWake,
            PowerAction::LinkDown,
            PowerAction::LinkUp,
            PowerAction::LinkUpRetry,
        ];
        for action in all {
            let written = serde_json::to_string(&action).unwrap();
            assert_eq!(written, format!("\"{}\"", action.as_str()));
            assert_eq!(
                serde_json::from_str::<PowerAction>(&written).unwrap(),
                action
            );
        }
    }
}
