//! Fuzz target: arbitrary bytes through gates::fuzzing::kustomize (a base and an overlay cut
//! from the input, rendered with name prefixes, name references, patches and generators:
//! an error or objects, never a panic or a hang).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gates::fuzzing::kustomize(data));
