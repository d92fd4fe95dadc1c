//! Fuzz target: arbitrary bytes through gates::fuzzing::env_list (a fleet run's environment
//! list, every problem naming its line, never a panic).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::env_list(data));
