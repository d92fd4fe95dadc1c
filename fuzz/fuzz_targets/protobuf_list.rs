//! Fuzz target: arbitrary bytes through gates::fuzzing::protobuf_list (a live list's page in
//! the API server's protobuf encoding decodes or is refused, and never panics).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::protobuf_list(data));
