//! The integration tests of gates-lab, in one test binary (one link instead of one per file):
//! each server over its real protocol, the world rules, the binary, and the clients nobody
//! here wrote (kubectl, proxmoxer, the Python kubernetes client, the Talos Go client, go-proxmox).

mod common;
mod proxmox_support;
mod talos_support;

mod attachment;
mod backends;
mod binary;
mod go_clients;
mod kube_api;
mod kube_python;
mod kubectl;
mod longhorn_system;
mod proxmox;
mod proxmox_conformance;
mod runner;
mod scale;
mod scenarios;
mod talos;
mod talos_errors;
mod talos_lab;
mod talos_vip;
mod tolerations;
mod world_rules;
