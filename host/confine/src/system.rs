//! What every agent may read: the system's programs and libraries, a short list of `/etc` files a
//! process needs to run (never the whole of `/etc`: `shadow`, `sudoers`, ssh host keys), and the
//! installation of the program it runs.

use std::path::{Path, PathBuf};

/// Trees of programs and libraries.
const SYSTEM_TREES: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/nix/store",
];

/// What a process reads in `/etc` to start, resolve names, check certificates and find its locale.
const ETC: &[&str] = &[
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "debian_version",
    "environment",
    "fonts",
    "gai.conf",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "locale.conf",
    "localtime",
    "lsb-release",
    "magic",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki",
    "protocols",
    "resolv.conf",
    "services",
    "ssl",
    "terminfo",
    "timezone",
    "bash.bashrc",
    "profile",
    "profile.d",
];

/// Read-only for every agent: the system trees, the `/etc` list, `/proc` (another process's
/// sensitive files there are refused by Landlock's ptrace rule: a sandboxed process may not inspect
/// one outside its sandbox), and the few `/sys` trees runtimes read for CPU and memory limits.
pub fn read_only() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM_TREES.iter().map(PathBuf::from).collect();
    paths.extend(ETC.iter().map(|f| Path::new("/etc").join(f)));
    paths.extend(
        ["/proc", "/sys/fs/cgroup", "/sys/devices/system/cpu"]
            .iter()
            .map(PathBuf::from),
    );
    paths.retain(|p| p.exists());
    paths
}

/// Devices an agent may read and write.
pub fn devices() -> Vec<PathBuf> {
    [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.exists())
    .collect()
}

/// Whether `path` is inside one of the trees every agent reads anyway.
pub fn is_system(path: &Path) -> bool {
    SYSTEM_TREES.iter().any(|t| path.starts_with(t))
}

/// The directories a program needs to run, read-only: where it is as named and where its links
/// lead, the package it belongs to when it is a script in a `node_modules` tree, and the same for
/// the interpreter its `#!` line names (found on `path` for `/usr/bin/env node`).
pub fn installation(program: &Path, path_var: Option<&str>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let Some(found) = locate(program, path_var) else {
        return dirs;
    };
    add_program(&found, &mut dirs);
    if let Some(interpreter) = shebang(&found)
        && let Some(found) = locate(&interpreter, path_var)
    {
        add_program(&found, &mut dirs);
    }
    dirs.retain(|d| !is_system(d));
    dirs.sort();
    dirs.dedup();
    dirs
}

fn add_program(found: &Path, dirs: &mut Vec<PathBuf>) {
    let real = found.canonicalize().unwrap_or_else(|_| found.to_path_buf());
    for p in [found, real.as_path()] {
        if let Some(parent) = p.parent() {
            dirs.push(parent.to_path_buf());
        }
        if let Some(root) = package_root(p) {
            dirs.push(root);
        }
    }
}

/// The directory holding the outermost `node_modules` above `path` (the project that installed
/// the package: its `package.json`, its other modules).
fn package_root(path: &Path) -> Option<PathBuf> {
    let mut root = None;
    for ancestor in path.ancestors() {
        if ancestor.file_name().is_some_and(|n| n == "node_modules") {
            root = ancestor.parent().map(Path::to_path_buf);
        }
    }
    root
}

/// `program` as a file: as it is when it has a slash, else the first match on `path_var`.
pub fn locate(program: &Path, path_var: Option<&str>) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The interpreter of a `#!` script: its program, or for `env` the program `env` runs.
fn shebang(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let word = words.find(|w| !w.starts_with('-'))?;
        return Some(PathBuf::from(word));
    }
    Some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_script_brings_its_package_and_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("agents/node_modules/@x/agent/dist");
        std::fs::create_dir_all(&pkg).unwrap();
        let script = pkg.join("index.js");
        std::fs::write(&script, "#!/usr/bin/env -S fakenode --flag\n").unwrap();
        let bin = dir.path().join("agents/node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(&script, bin.join("agent")).unwrap();
        let interp = dir.path().join("opt/node/bin");
        std::fs::create_dir_all(&interp).unwrap();
        std::fs::write(interp.join("fakenode"), "").unwrap();

        let dirs = installation(&bin.join("agent"), interp.to_str());
        let agents = dir.path().join("agents").canonicalize().unwrap();
        assert!(dirs.contains(&agents), "{dirs:?}");
        assert!(dirs.contains(&interp), "{dirs:?}");
        // Nothing above the installing project.
        assert!(!dirs.iter().any(|d| d == dir.path()), "{dirs:?}");
    }

    #[test]
    fn a_program_on_path_is_found_and_system_dirs_are_left_out() {
        let found = locate(Path::new("sh"), Some("/nonexistent:/bin:/usr/bin")).unwrap();
        assert!(found.ends_with("sh"));
        assert!(installation(&found, None).is_empty());
        assert!(locate(Path::new("no-such-program-here"), Some("/bin")).is_none());
    }

    #[test]
    fn etc_is_a_list_not_the_tree() {
        let read = read_only();
        assert!(!read.contains(&PathBuf::from("/etc")));
        assert!(!read.iter().any(|p| p.ends_with("shadow")));
    }
}
