//! Fuzz target: arbitrary bytes through gates::fuzzing::chaos_report (must never panic or hang).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::chaos_report(data));
