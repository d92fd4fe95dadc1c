//! Fuzz target: arbitrary bytes through gates::fuzzing::list_page (a live list's page splits
//! the same by the one-pass scan and the full parse, and never panics).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::list_page(data));
