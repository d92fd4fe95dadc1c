#![allow(dead_code)]
pub mod pki;
