//! Native smoke tests of the mapping (no sandbox): `cargo test -p converter-duduclaw --target
//! x86_64-unknown-linux-gnu` in guests/. The end-to-end tests through the component are
//! host/tests/convert_duduclaw.rs.

use std::path::{Path, PathBuf};

use convert_kit::{Job, Report};
use converter_duduclaw::{BUZZ, EXPERT};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared corpus, looked up as the host's tests do (`tests/src/lib.rs`): beside the checkout
/// in CI, beside a worktree's parent here.
fn corpus() -> PathBuf {
    [
        repo().join("../shared/corpus"),
        repo().join("shared/corpus"),
        PathBuf::from("/work/shared/corpus"),
    ]
    .into_iter()
    .find(|p| p.is_dir())
    .expect("the shared corpus (../shared/corpus beside the repository)")
}

/// One conversion, no options.
fn convert(source: &str, target: &str, input: &Path, output: &Path) -> Result<Report, String> {
    converter_duduclaw::convert(&Job {
        source,
        target,
        options: &[],
        input,
        output,
    })
}

fn temp(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dudu-native-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn clinic_round_trip() {
    let input = corpus().join("duduclaw-packs/distribution/packs/clinic-starter");
    let out = temp("clinic");
    let report = convert(EXPERT, BUZZ, &input, &out).unwrap();
    eprintln!("{report:#?}");
    let back = temp("clinic-back");
    let report = convert(BUZZ, EXPERT, &out, &back).unwrap();
    eprintln!("{report:#?}");
    eprintln!(
        "{}",
        std::fs::read_to_string(back.join("expert.toml")).unwrap()
    );
}

#[test]
fn meadow_round_trip() {
    let input = repo().join("examples/meadow");
    let out = temp("meadow");
    let report = convert(BUZZ, EXPERT, &input, &out).unwrap();
    eprintln!("{report:#?}");
    eprintln!(
        "{}",
        std::fs::read_to_string(out.join("expert.toml")).unwrap()
    );
    let back = temp("meadow-back");
    let report = convert(EXPERT, BUZZ, &out, &back).unwrap();
    eprintln!("{report:#?}");
    eprintln!(
        "{}",
        std::fs::read_to_string(back.join(".plugin/plugin.json")).unwrap()
    );
}
