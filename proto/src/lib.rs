//! The Talos API as gates speaks it: generated once from the `.proto` files beside this crate
//! (a wire-compatible subset of Talos's `machine` and `common` packages and COSI's
//! `cosi.resource`), so the harness's clients (gates-infra) and the lab's apid (gates-lab)
//! agree on every message by construction rather than by two builds kept in step.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// `google.rpc.Status`, as carried in `common.Metadata.status`.
pub mod google {
    pub mod rpc {
        tonic::include_proto!("google.rpc");
    }
}

/// Talos `common` package.
pub mod common {
    tonic::include_proto!("common");
}

/// Talos `machine` package: `MachineService` client and server stubs.
pub mod machine {
    tonic::include_proto!("machine");
}

/// COSI `cosi.resource` package: the `State` service (resource reads) and its messages.
pub mod cosi {
    pub mod resource {
        tonic::include_proto!("cosi.resource");
    }
}
