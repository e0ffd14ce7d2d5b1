//! `apiary-runtime`: every apiary command, the live harness, the sandbox and distribution included.
//! `apiary` runs the pack checks itself and hands every other command line here unchanged; it is
//! not meant to be called by hand, though it accepts the same command line.

fn main() -> std::process::ExitCode {
    apiary::cli::runtime_main()
}
