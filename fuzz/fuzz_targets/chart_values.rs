//! Fuzz target: arbitrary bytes through gates::fuzzing::chart_values (a values file for the
//! Helm chart judged against its schema, every problem naming its line, never a panic).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::chart_values(data));
