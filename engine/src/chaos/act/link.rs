//! The partition's writes: a VM's network device with its link pulled (`link_down=1`) or put
//! back (`link_down=0`), through a config update Proxmox applies live on a running VM
//! (qemu-server `vmconfig_update_net` → QMP `set_link`). Each device is read (the running
//! configuration, `current=1`), rendered back whole with only `link_down` changed, written
//! with the digest read (a concurrent edit is refused, not overwritten) and read back: only a
//! read-back link state counts, since a change Proxmox left pending (network hotplug off) would
//! otherwise pass for a partition. Every request is journaled before it is sent.

use std::time::Duration;

use gates_infra::proxmox::NetDevice;

use super::journal::{Entry, PlannedVm};
pub use super::power::LinkError;
use super::power::{Power, PowerAction, PowerError};

/// The first pause between two attempts to put a link back; doubled up to five seconds.
const UP_BACKOFF: Duration = Duration::from_millis(500);
const UP_BACKOFF_MAX: Duration = Duration::from_secs(5);

impl Power {
    /// Pull every planned device's link at once (as a switch port going dark does). Returns
    /// the errors, one per device whose link is not read back down.
    pub async fn pull_links(&self, vms: &[PlannedVm]) -> Vec<String> {
        let devices: Vec<(&PlannedVm, &String)> = vms
            .iter()
            .flat_map(|vm| vm.nets.iter().map(move |net| (vm, net)))
            .collect();
        let results =
            futures::future::join_all(devices.iter().map(|(vm, net)| self.pull(vm, net))).await;
        results
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect()
    }

    async fn pull(&self, vm: &PlannedVm, net: &str) -> Result<(), PowerError> {
        let pull = |source: PowerError| PowerError::Pull {
            net: net.to_string(),
            vmid: vm.vmid,
            name: vm.name.clone(),
            source: Box::new(source),
        };
        let (device, digest) = self
            .read_device(vm, net)
            .await
            .map_err(|e| pull(PowerError::LinkUnread(e)))?;
        self.note(Entry::LinkDownRequested {
            vmid: vm.vmid,
            host: vm.host.clone(),
            device: net.to_string(),
            before: device.to_string(),
        })
        .map_err(|e| pull(PowerError::NotJournaled(e)))?;
        let result = self.set_link(vm, net, &device, true, digest).await;
        self.count_device(PowerAction::LinkDown, vm, net, &result);
        match result {
            Ok(()) => self
                .note(Entry::LinkDown {
                    vmid: vm.vmid,
                    host: vm.host.clone(),
                    device: net.to_string(),
                })
                .map_err(|e| pull(PowerError::Journal(e))),
            Err(err) => {
                let _ = self.note(Entry::ActionFailed {
                    vmid: vm.vmid,
                    action: format!("link-down {net}"),
                    error: err.to_string(),
                });
                Err(pull(PowerError::Link(err)))
            }
        }
    }

    /// Put every planned device's link back, retrying each (with backoff) until `patience`
    /// (`chaos.recovery_timeout`) is spent: a slow Proxmox must not leave a VM cut off.
    pub async fn restore_links(&self, vms: &[PlannedVm], patience: Duration) -> Vec<String> {
        let devices: Vec<(&PlannedVm, &String)> = vms
            .iter()
            .flat_map(|vm| vm.nets.iter().map(move |net| (vm, net)))
            .collect();
        let results = futures::future::join_all(
            devices
                .iter()
                .map(|(vm, net)| self.restore_link(vm, net, patience)),
        )
        .await;
        results
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect()
    }

    async fn restore_link(
        &self,
        vm: &PlannedVm,
        net: &str,
        patience: Duration,
    ) -> Result<(), PowerError> {
        let began = tokio::time::Instant::now();
        let mut backoff = UP_BACKOFF;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            self.note(Entry::LinkUpRequested {
                vmid: vm.vmid,
                host: vm.host.clone(),
                device: net.to_string(),
            })
            .map_err(PowerError::Journal)?;
            let result = match self.read_device(vm, net).await {
                Ok((device, digest)) => self.set_link(vm, net, &device, false, digest).await,
                Err(err) => Err(err),
            };
            let counted = if attempts == 1 {
                PowerAction::LinkUp
            } else {
                PowerAction::LinkUpRetry
            };
            self.count_device(counted, vm, net, &result);
            let err = match result {
                Ok(()) => {
                    return self
                        .note(Entry::LinkUp {
                            vmid: vm.vmid,
                            host: vm.host.clone(),
                            device: net.to_string(),
                        })
                        .map_err(PowerError::Journal);
                }
                Err(err) => err,
            };
            let _ = self.note(Entry::ActionFailed {
                vmid: vm.vmid,
                action: format!("link-up {net}"),
                error: err.to_string(),
            });
            let spent = began.elapsed();
            if spent >= patience {
                return Err(PowerError::PutBackGaveUp {
                    net: net.to_string(),
                    vmid: vm.vmid,
                    name: vm.name.clone(),
                    attempts,
                    spent,
                    patience,
                    source: err,
                });
            }
            tokio::time::sleep(backoff.min(patience - spent)).await;
            backoff = (backoff * 2).min(UP_BACKOFF_MAX);
        }
    }

    /// The device as running now, parsed, and the config's digest.
    async fn read_device(
        &self,
        vm: &PlannedVm,
        net: &str,
    ) -> Result<(NetDevice, Option<String>), LinkError> {
        let read = self
            .client()
            .vm_net_devices(&vm.host, vm.vmid)
            .await
            .map_err(LinkError::ConfigUnread)?;
        let text = read
            .devices
            .iter()
            .find(|(key, _)| key == net)
            .map(|(_, text)| text.clone())
            .ok_or_else(|| LinkError::Gone {
                net: net.to_string(),
            })?;
        let device = match NetDevice::parse(&text) {
            Ok(device) => device,
            Err(source) => {
                return Err(LinkError::Unparsable {
                    net: net.to_string(),
                    text,
                    source,
                });
            }
        };
        Ok((device, read.digest))
    }

    /// Write the device with its link set, then read it back.
    async fn set_link(
        &self,
        vm: &PlannedVm,
        net: &str,
        device: &NetDevice,
        down: bool,
        digest: Option<String>,
    ) -> Result<(), LinkError> {
        let value = device.with_link_down(down).to_string();
        self.client()
            .set_vm_option(&vm.host, vm.vmid, net, &value, digest.as_deref())
            .await
            .map_err(LinkError::Write)?;
        let (back, _) = self.read_device(vm, net).await?;
        match back.link_down() {
            Ok(now) if now == down => Ok(()),
            _ => Err(LinkError::Pending {
                net: net.to_string(),
                back: back.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LinkError;
    use crate::chaos::journal;
    use crate::chaos::power::PowerError;
    use std::time::Duration;

    #[test]
    fn link_errors_say_the_device_the_vm_and_the_fix_as_one_sentence() {
        let gone = || LinkError::Gone { net: "net0".into() };
        let unread = PowerError::Pull {
            net: "net0".into(),
            vmid: 201,
            name: "cp-02".into(),
            source: Box::new(PowerError::LinkUnread(gone())),
        };
        assert_eq!(
            unread.to_string(),
            "pull the link of net0 of VM 201 cp-02: net0 is no longer in its config; nothing was sent"
        );
        let gave_up = PowerError::PutBackGaveUp {
            net: "net0".into(),
            vmid: 201,
            name: "cp-02".into(),
            attempts: 4,
            spent: Duration::from_millis(2460),
            patience: Duration::from_secs(3),
            source: gone(),
        };
        assert_eq!(
            gave_up.to_string(),
            "put the link of net0 of VM 201 cp-02 back: gave up after 4 attempts over 2.5s (chaos.recovery_timeout 3s): net0 is no longer in its config; run `gates recover` or set link_down=0 on net0 by hand"
        );
        let pending = LinkError::Pending {
            net: "net0".into(),
            back: "virtio=AA:BB,link_down=1".into(),
        };
        assert_eq!(
            pending.to_string(),
            "net0 reads back as \"virtio=AA:BB,link_down=1\" after the update: the change is pending, not applied (is network hotplug off for this VM?)"
        );
    }

    #[tokio::test]
    async fn a_device_that_cannot_be_read_is_never_written_nor_journaled_as_pulled() {
        let (power, path, _dir) = crate::chaos::act::test_power::unreachable_power();
        let mut vm = crate::chaos::test_support::vm(201, "talos-lab-cp-02");
        vm.nets = vec!["net0".into()];
        let errors = power.pull_links(&[vm]).await;
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("pull the link of net0 of VM 201")
                && errors[0].contains("nothing was sent"),
            "{errors:?}"
        );
        let records = journal::read(&path).unwrap();
        assert!(journal::links_owed(&records).is_empty());
        assert!(power.issued().is_empty(), "no write was sent");
    }
}
