use std::process::ExitCode;

fn main() -> ExitCode {
    gates::app::main()
}
