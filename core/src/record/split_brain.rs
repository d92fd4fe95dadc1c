//! A partition run's split-brain signals, as its report lists them: which signal, how many
//! samples read it, and what was found.

use serde::{Deserialize, Serialize};

use crate::verdict::Finding;

/// The three ways a split brain shows (docs/reality.md says why each is evidence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signal {
    /// Two control planes list the API VIP at once.
    ApiVip,
    /// Two nodes announce one L2 address.
    L2Announcement,
    /// The cut-off etcd member led or took writes on its own.
    EtcdMinority,
}

impl Signal {
    /// The name the report, the trial and the page use (`api-vip`).
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::ApiVip => "api-vip",
            Signal::L2Announcement => "l2-announcement",
            Signal::EtcdMinority => "etcd-minority",
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One signal's verdict, as the report shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SignalOutcome {
    pub signal: Signal,
    /// Samples that read this signal.
    #[serde(default)]
    pub samples: usize,
    pub finding: Finding,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_signal_is_written_as_the_name_it_reads_back_from() {
        for signal in [Signal::ApiVip, Signal::L2Announcement, Signal::EtcdMinority] {
            let written = serde_json::to_string(&signal).unwrap();
            assert_eq!(written, format!("\"{signal}\""));
            assert_eq!(serde_json::from_str::<Signal>(&written).unwrap(), signal);
        }
    }
}
