//! Compiles the Talos API subset in `../proto` (`machine`, `common`, COSI `cosi.resource`)
//! with protox (no system `protoc`): server stubs for the lab's apid into `$OUT_DIR/server`,
//! and client stubs into `$OUT_DIR/client`, which only the lab's integration tests include.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto");
    for dir in ["machine", "common", "google/rpc", "cosi"] {
        println!("cargo:rerun-if-changed={}", proto_root.join(dir).display());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    for (sub, server) in [("server", true), ("client", false)] {
        let dir = out.join(sub);
        std::fs::create_dir_all(&dir)?;
        let fds = protox::compile(
            [
                "machine/machine.proto",
                "cosi/resource.proto",
                "cosi/state.proto",
            ],
            [&proto_root],
        )?;
        tonic_prost_build::configure()
            .build_server(server)
            .build_client(!server)
            .build_transport(false)
            .out_dir(&dir)
            .compile_fds(fds)?;
    }
    Ok(())
}
