//! What `gates snapshot` records of the Talos API, the API endpoint and Proxmox (an
//! annotation on the List it writes), so an offline run evaluates gates 1 and 5 from the
//! same answers the live run had, including why a part was absent.

use serde::{Deserialize, Serialize};

use crate::state::{ApiState, Collected, ProxmoxState, State, TalosState};

/// Annotation on the List that `gates snapshot` writes: this record as JSON.
pub const INFRA_ANNOTATION: &str = "gates.adr/infra";

/// A [`Collected`] value in a form that reads back unambiguously.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "state", content = "value", rename_all = "kebab-case")]
pub enum Recorded<T> {
    Present(T),
    Absent(String),
    NotApplicable(String),
}

impl<T: Clone> From<&Collected<T>> for Recorded<T> {
    fn from(c: &Collected<T>) -> Self {
        match c {
            Collected::Present(v) => Recorded::Present(v.clone()),
            Collected::Absent(r) => Recorded::Absent(r.clone()),
            Collected::NotApplicable(r) => Recorded::NotApplicable(r.clone()),
        }
    }
}

impl<T> From<Recorded<T>> for Collected<T> {
    fn from(r: Recorded<T>) -> Self {
        match r {
            Recorded::Present(v) => Collected::Present(v),
            Recorded::Absent(r) => Collected::Absent(r),
            Recorded::NotApplicable(r) => Collected::NotApplicable(r),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InfraRecord {
    pub talos: Recorded<TalosState>,
    pub api: Recorded<ApiState>,
    pub proxmox: Recorded<ProxmoxState>,
}

impl InfraRecord {
    pub fn apply(self, state: &mut State) {
        state.talos = self.talos.into();
        state.api = self.api.into();
        state.proxmox = self.proxmox.into();
    }
}

/// For a snapshot without a record (kubectl output, or an older `gates snapshot`): the
/// live-only parts are not part of the run, and the reason says how to include them.
pub fn not_recorded(state: &mut State) {
    let reason = |what: &str| {
        format!("{what}: the snapshot does not record it (files written by `gates snapshot` do)")
    };
    state.talos = Collected::NotApplicable(reason("Talos"));
    state.proxmox = Collected::NotApplicable(reason("Proxmox"));
    state.api = Collected::NotApplicable(reason("the API endpoint"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ProxmoxHost, Source, TalosEndpoint};

    #[test]
    fn a_record_reads_back_as_it_was_collected() {
        let mut state = State::empty(
            Source::Live {
                context: "lab".into(),
            },
            chrono::Utc::now(),
        );
        state.talos = Collected::Present(TalosState {
            context: "lab".into(),
            endpoints: vec![TalosEndpoint {
                endpoint: "10.0.0.1".into(),
                view: Err("connection refused".into()),
                addresses: Ok(vec!["10.0.0.10".parse().unwrap()]),
            }],
            ..Default::default()
        });
        state.api = Collected::NotApplicable("no `api` section".into());
        state.proxmox = Collected::Present(ProxmoxState {
            hosts: vec![ProxmoxHost {
                name: "pve1".into(),
                online: false,
            }],
            ..Default::default()
        });
        let record = InfraRecord {
            talos: (&state.talos).into(),
            api: (&state.api).into(),
            proxmox: (&state.proxmox).into(),
        };
        let text = serde_json::to_string(&record).unwrap();
        let back: InfraRecord = serde_json::from_str(&text).unwrap();
        let mut read = State::empty(Source::Snapshot { files: vec![] }, chrono::Utc::now());
        back.apply(&mut read);
        let talos = read.talos.present().expect("talos recorded");
        assert_eq!(
            talos.endpoints[0]
                .view
                .as_ref()
                .err()
                .map(|why| why.0.as_str()),
            Some("connection refused")
        );
        assert_eq!(talos.holders(&["10.0.0.10".parse().unwrap()]).len(), 1);
        assert!(matches!(read.api, Collected::NotApplicable(ref r) if r == "no `api` section"));
        assert!(!read.proxmox.present().unwrap().hosts[0].online);
    }
}
