//! Fuzz target: arbitrary bytes through gates::fuzzing::net_device (a VM's `netN` property
//! string parsed, pulled and rendered back: never a panic, never a changed string).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::net_device(data));
