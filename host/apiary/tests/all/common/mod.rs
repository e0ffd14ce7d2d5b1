//! Shared set-up for the converter tests: run a built-in converter component through the sandbox
//! library, the way `apiary convert` does, on a tree in a temp dir.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use apiary::builtin::BUILT_GUESTS_DIR;
use apiary::sandbox::converter::{ConverterRunner, Report, Request};
use apiary::sandbox::{Sandbox, SandboxConfig};

/// One sandbox per test binary, without a compile cache (the operator's cache stays untouched).
pub fn sandbox() -> &'static Sandbox {
    static SB: std::sync::OnceLock<Sandbox> = std::sync::OnceLock::new();
    SB.get_or_init(|| {
        Sandbox::new(SandboxConfig {
            cache_dir: None,
            ..SandboxConfig::default()
        })
        .expect("sandbox")
    })
}

/// A built guest component by crate file name, e.g. `converter_claude`.
pub fn converter(name: &str) -> ConverterRunner {
    let path = Path::new(BUILT_GUESTS_DIR).join(format!("{name}.wasm"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ConverterRunner::new(sandbox().load(name, &bytes).expect("load")).expect("converter world")
}

/// Converts `input` from `source` to `target` into a fresh temp dir; returns the report and the
/// output dir (kept alive by the returned guard).
pub fn convert(
    runner: &ConverterRunner,
    source: &str,
    target: &str,
    input: &Path,
) -> Result<(Report, tempfile::TempDir), String> {
    let output = tempfile::tempdir().expect("tempdir");
    let request = Request {
        source: source.into(),
        target: target.into(),
        options: vec![],
    };
    runner
        .convert(sandbox(), &request, input, output.path())
        .map(|out| (out.value, output))
        .map_err(|e| e.to_string())
}

/// `../shared/corpus/<rel>` beside the repository, else in the machine's shared copy (as the e2e
/// suite looks for it).
pub fn corpus(rel: &str) -> PathBuf {
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let root = if beside.is_dir() {
        beside
    } else {
        PathBuf::from("/work/shared/corpus")
    };
    root.join(rel)
}

/// Every finding code in a report, prefixed by its list (`lost:unknown-field`), for assertions.
pub fn codes(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for (list, findings) in [
        ("lost", &report.lost),
        ("synthesised", &report.synthesised),
        ("normalised", &report.normalised),
        ("reinterpreted", &report.reinterpreted),
    ] {
        out.extend(findings.iter().map(|f| format!("{list}:{}", f.code)));
    }
    out
}
