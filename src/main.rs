use std::process::ExitCode;

/// Typing 100,000 pods is mostly small allocations, which mimalloc serves faster than the
/// system allocator. It is built without transparent huge pages (see `Cargo.toml`): a
/// check's memory is touched once, and zeroing whole 2 MiB pages for it cost more than the
/// page-table walks they save.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gates::app::main()
}
