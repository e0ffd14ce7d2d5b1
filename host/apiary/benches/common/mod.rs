//! Helpers shared by the benchmarks.

/// The `apiary-agent` binary of this build profile (a workspace member of its own):
/// target/<profile>/deps/<bench> -> target/<profile>/apiary-agent.
pub fn agent_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("bench executable path");
    let bin = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target profile dir")
        .join(format!("apiary-agent{}", std::env::consts::EXE_SUFFIX));
    if !bin.is_file() {
        eprintln!(
            "{} is missing: build it first with `cargo build --release -p apiary-agent`",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

/// The `apiary` binary of this build profile (the agents' launcher, the shards' replicas).
#[allow(dead_code)] // not every bench starts apiary itself
pub fn apiary_bin() -> std::path::PathBuf {
    let bin = agent_bin().with_file_name(format!("apiary{}", std::env::consts::EXE_SUFFIX));
    if !bin.is_file() {
        eprintln!(
            "{} is missing: build it first with `cargo build --release -p apiary`",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}
