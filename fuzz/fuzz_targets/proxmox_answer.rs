//! Fuzz target: arbitrary bytes through gates::fuzzing::proxmox_answer (a VM config's
//! drives and /storage entries as gates reads them, never a panic).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::proxmox_answer(data));
