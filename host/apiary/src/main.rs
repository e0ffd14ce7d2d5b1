fn main() -> std::process::ExitCode {
    apiary::cli::main()
}
