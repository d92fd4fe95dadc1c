//! Act: the only writes a run makes. Power actions on the planned VMs (and host), each
//! journaled before it is sent, so a run that dies can be finished by `gates recover`.

pub mod inject;
pub mod journal;
pub mod lease;
pub mod link;
pub mod power;
pub mod recover;
pub mod restore;
pub mod signals;
#[cfg(test)]
pub mod test_power;
