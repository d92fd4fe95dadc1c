//! Fuzz target: arbitrary bytes through gates::fuzzing::talos_template (must never panic or hang).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::talos_template(data));
