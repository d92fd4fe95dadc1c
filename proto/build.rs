//! Compiles the Talos API subset beside this file (`machine`, `common`, `google.rpc`, COSI's
//! `cosi.resource` and its `State` service) with protox, so no system `protoc` is needed.
//! Client and server stubs both: gates-infra calls apid with the clients, the lab serves
//! the same services, and tests on each side use the other half.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for dir in ["machine", "common", "google/rpc", "cosi"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let fds = protox::compile(
        [
            "machine/machine.proto",
            "cosi/resource.proto",
            "cosi/state.proto",
        ],
        [&root],
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
