#![allow(dead_code)]
pub mod pki;
pub mod pve;
