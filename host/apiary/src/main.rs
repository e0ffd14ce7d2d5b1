fn main() -> std::process::ExitCode {
    // A confined agent's launcher is this binary again: it must act before anything else runs
    // (it confines itself while it has one thread).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    apiary_confine::launcher_if_asked(&args);
    apiary::cli::main()
}
