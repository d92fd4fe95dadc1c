use std::process::ExitCode;

/// Typing 100,000 pods is mostly small allocations, which mimalloc serves faster than the
/// system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gates::app::main()
}
