//! Compiles our Talos API subset (`../proto`) with protox, so no system `protoc` is needed.
//! Includes COSI's `State` reads (`cosi.resource`). Server stubs are generated too: the integration tests serve them over real mTLS.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto");
    let files = [
        "machine/machine.proto",
        "cosi/resource.proto",
        "cosi/state.proto",
    ];
    for dir in ["machine", "common", "google/rpc", "cosi"] {
        println!("cargo:rerun-if-changed={}", proto_root.join(dir).display());
    }
    let fds = protox::compile(files, [&proto_root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
