//! Fuzz target: arbitrary bytes through gates::fuzzing::prometheus_answer (a range query's
//! answer as gates decodes and measures it, never a panic).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::prometheus_answer(data));
