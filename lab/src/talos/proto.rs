//! Server stubs and messages generated from `proto/` (Talos's `machine` and `common` packages,
//! COSI's `cosi.resource`; wire-compatible with apid) by `build.rs`.

#![allow(clippy::all, missing_docs)]

pub mod common {
    include!(concat!(env!("OUT_DIR"), "/server/common.rs"));
}

pub mod machine {
    include!(concat!(env!("OUT_DIR"), "/server/machine.rs"));
}

pub mod google {
    pub mod rpc {
        include!(concat!(env!("OUT_DIR"), "/server/google.rpc.rs"));
    }
}

pub mod cosi {
    pub mod resource {
        include!(concat!(env!("OUT_DIR"), "/server/cosi.resource.rs"));
    }
}
