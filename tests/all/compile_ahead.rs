//! Hook components are compiled into the compile cache before `apiary up` needs them: by `apiary
//! trust --hooks` and `apiary install` (and `component add` for converters), so a big component
//! (12-18 MB from componentize-js or componentize-py) starts from the cache in milliseconds.
//! A hook `up` finds uncompiled is compiled with a load deadline scaled to its size, announced
//! by a `compiling` line, never taken for a hang. A component that cannot be loaded is refused at
//! trust, naming it, with nothing trusted.

use std::path::Path;

use apiary_e2e::{Run, apiary, guest};

use crate::support::live::{Up, event_of, persona, write_pack};

const ID: &str = "com.example.ahead";

/// A pack whose persona scribe runs `hooks/audit.wasm` (the Rust audit hook) on each message.
fn audit_pack(dir: &Path) {
    write_pack(
        dir,
        ID,
        &[(
            "scribe",
            &persona(
                "scribe",
                "subscribe: [\"general\"]\nhooks:\n  on_message: ./hooks/audit.wasm",
                "You are Scribe.",
            ),
        )],
        &[],
    );
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::copy(guest("hook_audit"), dir.join("hooks/audit.wasm")).unwrap();
}

#[test]
fn up_compiles_a_hook_missing_from_the_cache_saying_so_then_loads_it_from_the_cache() {
    // A HOME of its own: an empty compile cache.
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    audit_pack(&pack);
    let mut up = Up::start(home.path(), &[&pack], &[], &[]);
    let compiling = up
        .seen
        .iter()
        .position(|l| l.starts_with("compiling"))
        .unwrap_or_else(|| panic!("no compiling line: {:#?}", up.seen));
    let line = &up.seen[compiling];
    assert!(
        line.contains(&format!("{ID} hook ./hooks/audit.wasm"))
            && line.contains("not in the compile cache yet")
            && line.contains("apiary trust <pack> --hooks"),
        "{line}"
    );
    let ready = up
        .seen
        .iter()
        .position(|l| l.starts_with("persona scribe ready"))
        .unwrap();
    assert!(compiling < ready, "{:#?}", up.seen);
    up.stop_ok();

    // The second start finds it in the cache: nothing to announce.
    let mut up = Up::start(home.path(), &[&pack], &["--json"], &[]);
    assert!(
        !up.seen.iter().any(|l| event_of(l) == "compiling"),
        "{:#?}",
        up.seen
    );
    up.stop_ok();
}

fn trust(home: &Path) -> Run {
    let mut cmd = apiary(home);
    cmd.current_dir(home)
        .args(["trust", "./pack", "--hooks", "--yes", "--json", "--root"])
        .arg(home.join("root"));
    Run::of(cmd)
}

#[test]
fn trust_compiles_hook_components_ahead_and_refuses_one_that_cannot_load() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    audit_pack(&pack);
    let r = trust(home.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["trusted"], true);
    assert_eq!(v["compiled"][0]["path"], "hooks/audit.wasm", "{v:#}");
    assert_eq!(v["compiled"][0]["outcome"], "compiled", "{v:#}");
    // Trusting again finds it compiled.
    let v = trust(home.path()).json();
    assert_eq!(v["compiled"][0]["outcome"], "cached", "{v:#}");
    let mut up = Up::start(home.path(), &[&pack], &["--json"], &[]);
    assert!(
        !up.seen.iter().any(|l| event_of(l) == "compiling"),
        "{:#?}",
        up.seen
    );
    up.stop_ok();

    // Hostile: the file is swapped for one that is no component. Trust refuses, naming the file
    // and why, and records nothing for it.
    std::fs::write(pack.join("hooks/audit.wasm"), b"\0asm not really").unwrap();
    let store = home.path().join("root/.apiary");
    let before = apiary_e2e::snapshot(&store, &[]);
    let r = trust(home.path());
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(
        all.contains("hook component hooks/audit.wasm cannot be loaded")
            && all.contains("not a WebAssembly component")
            && all.contains("nothing was trusted"),
        "{all}"
    );
    assert_eq!(apiary_e2e::snapshot(&store, &[]), before);
}

#[test]
fn install_compiles_the_packs_hook_components() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    audit_pack(&pack);
    let archive = home.path().join("ahead.buzzpack");
    let mut build = apiary(home.path());
    build
        .args(["pack", "build"])
        .arg(&pack)
        .arg("--output")
        .arg(&archive);
    let r = Run::of(build);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let mut install = apiary(home.path());
    install
        .arg("install")
        .arg(&archive)
        .args(["--json", "--root"])
        .arg(home.path().join("root"));
    let r = Run::of(install);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["compiled"][0]["path"], "hooks/audit.wasm", "{v:#}");
    assert_eq!(v["compiled"][0]["outcome"], "compiled", "{v:#}");
}
