//! A partition's plan: the network devices of every planned VM, read from Proxmox and parsed
//! before anything is touched. A VM whose devices cannot be read, have none, cannot be parsed
//! (so could not be written back faithfully) or already have a pulled link refuses the run:
//! a partition must be one the restore fully undoes.

use gates_infra::proxmox::{NetDevice, ProxmoxClient};

use super::{Refusal, Target};
use crate::chaos::journal::PlannedVm;

/// Fill each planned VM's `nets`, or say every VM that refuses the run and why.
pub async fn read_devices(client: &ProxmoxClient, target: &mut Target) -> Result<(), Refusal> {
    let mut refusals = Vec::new();
    for vm in &mut target.vms {
        match devices_of(client, vm).await {
            Ok(nets) => vm.nets = nets,
            Err(why) => refusals.push(why.0),
        }
    }
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(Refusal(format!(
            "a partition pulls every network device of the planned VMs, and must read each one back first: {}",
            refusals.join("; ")
        )))
    }
}

async fn devices_of(client: &ProxmoxClient, vm: &PlannedVm) -> Result<Vec<String>, Refusal> {
    let subject = format!("VM {} {} on {}", vm.vmid, vm.name, vm.host);
    let read = client
        .vm_net_devices(&vm.host, vm.vmid)
        .await
        .map_err(|err| {
            Refusal(format!(
                "{subject}: its network devices cannot be read ({err})"
            ))
        })?;
    judge_devices(&subject, &read.devices)
}

/// The device keys to pull, or why not: none, one that does not parse, one already pulled.
pub fn judge_devices(subject: &str, devices: &[(String, String)]) -> Result<Vec<String>, Refusal> {
    if devices.is_empty() {
        return Err(Refusal(format!(
            "{subject} has no network device (netN) in its running configuration to pull"
        )));
    }
    let mut keys = Vec::new();
    for (key, text) in devices {
        let device = NetDevice::parse(text).map_err(|err| {
            Refusal(format!("{subject}: {key} = {text:?} cannot be parsed ({err}), so it could not be written back unchanged; fix the property string or leave this host out"))
        })?;
        if device.link_down() == Ok(true) {
            return Err(Refusal(format!(
                "{subject}: {key} already has link_down=1; restoring it would not give back the VM's network as it was: bring the link up first"
            )));
        }
        keys.push(key.clone());
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_network_device_of_a_vm_is_planned() {
        let planned = judge_devices(
            "VM 201",
            &devices(&[
                ("net0", "virtio=AA:BB,bridge=vmbr0"),
                ("net1", "virtio=AA:BC,bridge=vmbr1,link_down=0"),
            ]),
        );
        assert_eq!(planned, Ok(vec!["net0".to_string(), "net1".to_string()]));
    }

    #[test]
    fn a_device_that_cannot_be_parsed_refuses_the_run_naming_the_vm_and_key() {
        let err = judge_devices(
            "VM 201 cp-02 on pve2",
            &devices(&[("net0", "virtio=AA:BB,,bridge=vmbr0")]),
        )
        .unwrap_err();
        assert!(
            err.0.contains(
                "VM 201 cp-02 on pve2: net0 = \"virtio=AA:BB,,bridge=vmbr0\" cannot be parsed"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_vm_without_devices_or_with_a_pulled_link_refuses_the_run() {
        let none = judge_devices("VM 201", &[]).unwrap_err();
        assert!(none.0.contains("no network device"), "{none}");
        let pulled =
            judge_devices("VM 201", &devices(&[("net0", "virtio=AA:BB,link_down=1")])).unwrap_err();
        assert!(
            pulled.0.contains("net0 already has link_down=1"),
            "{pulled}"
        );
    }
}
