//! Builds the guest components in `guests/` (their own cargo workspace, target wasm32-wasip2) so
//! that `cargo build` of the host is the only build step. The built `.wasm` files land in
//! `<repo>/target/guests/wasm32-wasip2/release/`; `trigger-default` is embedded into the binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// Environment the outer cargo sets that must not leak into the nested wasm build.
const CLEARED_ENV: &[&str] = &[
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_INCREMENTAL",
];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    // host/apiary -> the repository root
    let repo = manifest_dir
        .ancestors()
        .nth(2)
        .expect("repository root")
        .to_path_buf();
    let guests = repo.join("guests");
    let wit = repo.join("wit");

    watch(&wit);
    watch_guests(&guests);
    // trigger-default's decision is this crate, a path dependency from outside guests/.
    watch(&repo.join("host").join("triggers"));
    println!("cargo:rerun-if-env-changed=APIARY_SKIP_GUEST_BUILD");
    // Two checkouts sharing one target dir share this build script's fingerprint (cargo leaves
    // the path out of a workspace member's metadata hash); the paths above differ per checkout,
    // so rerun when the checkout changes.
    println!("cargo:rerun-if-env-changed=CARGO_MANIFEST_DIR");

    let target_dir = repo.join("target").join("guests");
    let out = target_dir.join("wasm32-wasip2").join("release");
    println!("cargo:rustc-env=APIARY_GUESTS_DIR={}", out.display());

    if std::env::var_os("APIARY_SKIP_GUEST_BUILD").is_none() {
        check_wasm_target();
        build_guests(&guests, &target_dir);
    }

    let trigger = out.join("trigger_default.wasm");
    if !trigger.is_file() {
        fail(&format!(
            "{} was not built (set APIARY_SKIP_GUEST_BUILD only when the guests are already built)",
            trigger.display()
        ));
    }
    println!(
        "cargo:rustc-env=APIARY_TRIGGER_DEFAULT_WASM={}",
        trigger.display()
    );
    embed_converters(&out);
    embed_templates(&manifest_dir.join("templates"));
    pack_relative_relocations();
}

/// Links `apiary` with its relative relocations packed (`DT_RELR`, `-z pack-relative-relocs`) when
/// the linker and the C library can: the binary holds ~47k of them (vtables, string tables,
/// wasmtime's and the SDKs' statics), and as `.rela.dyn` entries the loader read 1.1 MB of them
/// at every start, most of a small command's page faults. Packed, they are a few kilobytes. The
/// probe links and runs a C program with the flag; anything else leaves the default.
fn pack_relative_relocations() {
    let target = std::env::var("TARGET").unwrap_or_default();
    if !target.ends_with("-linux-gnu") {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let src = out.join("relr_probe.c");
    let exe = out.join("relr_probe");
    let probe = std::fs::write(&src, "int main(void) { return 0; }\n").is_ok()
        && Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .arg("-Wl,-z,pack-relative-relocs")
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .is_ok_and(|o| o.status.success() && o.stderr.is_empty())
        && Command::new(&exe).status().is_ok_and(|s| s.success());
    if probe {
        println!("cargo:rustc-link-arg-bin=apiary=-Wl,-z,pack-relative-relocs");
    } else {
        println!("cargo:warning=the linker cannot pack relative relocations; apiary starts slower");
    }
}

/// Writes `$OUT_DIR/templates.rs`: a `&[(&str, &[(&str, &[u8])])]` of the project templates for
/// `apiary component new`, one per directory `templates/<kind>-<lang>/`, with every file under it
/// (relative `/`-separated path, contents). Scanned, so a template added there needs no code.
fn embed_templates(dir: &Path) {
    watch(dir);
    let mut templates: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    templates.sort();
    let mut rows = String::from("&[\n");
    for template in &templates {
        let name = template.file_name().unwrap_or_default().to_string_lossy();
        rows.push_str(&format!("    ({name:?}, &[\n"));
        let mut files = Vec::new();
        collect_files(template, &mut files);
        files.sort();
        for file in files {
            let relative = file.strip_prefix(template).expect("under the template");
            let relative: Vec<_> = relative.iter().map(|c| c.to_string_lossy()).collect();
            rows.push_str(&format!(
                "        ({:?}, include_bytes!({:?}) as &[u8]),\n",
                relative.join("/"),
                file.display().to_string()
            ));
        }
        rows.push_str("    ]),\n");
    }
    rows.push_str("]\n");
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("templates.rs");
    if let Err(e) = std::fs::write(&dest, rows) {
        fail(&format!("cannot write {}: {e}", dest.display()));
    }
}

/// Every regular file under `dir`, recursively. A symbolic link to a directory is followed (a
/// template shares the frozen WIT that way: `converter-js/wit/deps/apiary-plugin@0.1.0`); other
/// links are skipped.
fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let linked_dir = kind.is_symlink() && entry.path().is_dir();
        if kind.is_dir() || linked_dir {
            collect_files(&entry.path(), files);
        } else if kind.is_file() {
            files.push(entry.path());
        }
    }
}

/// The guest crates embedded as built-in converters (`apiary convert`). `converter-sample` is
/// deliberately not one: it only serves tests.
const BUILTIN_CONVERTERS: &[&str] = &[
    "converter-agent-plugins",
    "converter-claude",
    "converter-duduclaw",
    "converter-agent-compose",
];

/// Writes `$OUT_DIR/builtin_converters.rs`: a `&[(&str, &[u8], &str)]` of the built-in converter
/// components that were built, each with its SHA-256 (hex): hashed here once, not at every start
/// of a command. A missing one is a warning, not an error, so the host builds while a converter
/// crate is still being written; `apiary convert --list` shows what is embedded.
fn embed_converters(out: &Path) {
    let mut rows = String::from("&[\n");
    for crate_name in BUILTIN_CONVERTERS {
        let file = out.join(format!("{}.wasm", crate_name.replace('-', "_")));
        if let Ok(bytes) = std::fs::read(&file) {
            let digest: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            rows.push_str(&format!(
                "    ({crate_name:?}, include_bytes!({:?}) as &[u8], {digest:?}),\n",
                file.display().to_string()
            ));
        } else {
            println!(
                "cargo:warning=built-in converter {crate_name} is not built ({} missing); apiary will run without it",
                file.display()
            );
        }
    }
    rows.push_str("]\n");
    let dest =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("builtin_converters.rs");
    if let Err(e) = std::fs::write(&dest, rows) {
        fail(&format!("cannot write {}: {e}", dest.display()));
    }
}

/// Prints one clear line and stops the build.
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    println!("cargo:warning={message}");
    std::process::exit(1);
}

fn rustc() -> String {
    std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string())
}

fn check_wasm_target() {
    let sysroot = Command::new(rustc())
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(sysroot) = sysroot
        && !sysroot.join("lib/rustlib/wasm32-wasip2").is_dir()
    {
        fail(
            "the wasm32-wasip2 Rust target is not installed; run `rustup target add wasm32-wasip2` and build again",
        );
    }
}

fn build_guests(guests: &Path, target_dir: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(guests)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(target_dir);
    for var in CLEARED_ENV {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run cargo for the guests: {e}")));
    if !status.success() {
        fail("building the guest components in guests/ failed (see the cargo output above)");
    }
}

fn watch(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
}

/// Every source of the guest workspace, but not a `target/` inside it (a build there would
/// otherwise trigger a rebuild of the host every time).
fn watch_guests(guests: &Path) {
    let Ok(entries) = std::fs::read_dir(guests) else {
        fail(&format!("{} is missing", guests.display()));
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        watch(&entry.path());
    }
}
