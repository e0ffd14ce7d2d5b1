//! The hostile-archive suite: every archive below is refused with a clear error, and nothing is
//! written anywhere but the (emptied) staging area: the install root holds only `.apiary/` with
//! empty scratch directories, no `pack.lock` and no pack directory, and nothing new appears beside
//! the archive.

use std::io::Write;
use std::path::Path;

use apiary_e2e::snapshot;

use crate::support::dist;
use crate::support::dist::{
    RawEntry, assert_root_clean, pack_entries, raw_zip, run_root, write_checksum,
};

const ID: &str = "com.example.hostile";

/// Installs `bytes` as `<name>` (with a matching checksum unless `checksum` is false) and checks the
/// refusal: exit 1, the JSON error code, a human message containing `needle`, nothing written.
fn refuse(name: &str, bytes: &[u8], checksum: bool, code: &str, needle: &str) {
    let home = tempfile::tempdir().unwrap();
    let drop_dir = home.path().join("downloads");
    std::fs::create_dir(&drop_dir).unwrap();
    let archive = drop_dir.join(name);
    std::fs::write(&archive, bytes).unwrap();
    if checksum {
        write_checksum(&archive);
    }
    let before = snapshot(home.path(), &["root"]);
    let root = home.path().join("root");

    let run = run_root(home.path(), &root, &["install", archive.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{name}: {}\n{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["ok"], false, "{name}");
    assert_eq!(v["error"]["code"], code, "{name}: {}", run.stdout);

    // The human form says what is wrong.
    let mut cmd = apiary_e2e::apiary(home.path());
    cmd.arg("install").arg(&archive).arg("--root").arg(&root);
    let human = apiary_e2e::Run::of(cmd);
    assert_eq!(human.code, 1);
    assert!(
        human.stderr.contains(needle),
        "{name}: expected {needle:?} in:\n{}",
        human.stderr
    );

    assert_root_clean(&root, &[".apiary"]);
    let after = snapshot(home.path(), &["root"]);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "{name}: files appeared outside the install root"
    );
    // Nothing anywhere is called `evil`.
    assert!(
        !snapshot(home.path(), &[])
            .keys()
            .any(|k| k.contains("evil")),
        "{name}: an `evil` file was written"
    );
}

fn with(extra: RawEntry) -> Vec<u8> {
    let mut entries = pack_entries(ID, "1.0.0");
    entries.push(extra);
    raw_zip(&entries)
}

#[test]
fn zip_slip_is_refused() {
    refuse(
        "slip.buzzpack",
        &with(RawEntry::file("agents/../../evil.sh", b"#!/bin/sh\n")),
        true,
        "archive.path",
        "zip-slip",
    );
    refuse(
        "slip2.buzzpack",
        &with(RawEntry::file("../evil.sh", b"x")),
        true,
        "archive.path",
        "..",
    );
}

#[test]
fn absolute_paths_and_drive_letters_are_refused() {
    refuse(
        "abs.buzzpack",
        &with(RawEntry::file("/tmp/evil", b"x")),
        true,
        "archive.path",
        "absolute",
    );
    refuse(
        "drive.buzzpack",
        &with(RawEntry::file("C:/evil", b"x")),
        true,
        "archive.path",
        "drive letter",
    );
    refuse(
        "backslash.buzzpack",
        &with(RawEntry::file("..\\evil", b"x")),
        true,
        "archive.path",
        "backslash",
    );
}

#[test]
fn symlink_entries_are_refused() {
    refuse(
        "link.buzzpack",
        &with(RawEntry {
            name: "agents/evil-link".into(),
            data: b"/etc/passwd".to_vec(),
            mode: 0o120_777,
            declared: None,
        }),
        true,
        "archive.symlink",
        "symbolic link",
    );
}

#[test]
fn device_entries_are_refused() {
    refuse(
        "dev.buzzpack",
        &with(RawEntry {
            name: "evil-dev".into(),
            data: Vec::new(),
            mode: 0o020_644,
            declared: None,
        }),
        true,
        "archive.special",
        "device",
    );
}

#[test]
fn duplicate_entries_are_refused() {
    let mut entries = pack_entries(ID, "1.0.0");
    entries.push(RawEntry::file("instructions.md", b"the second copy wins?"));
    refuse(
        "dup.buzzpack",
        &raw_zip(&entries),
        true,
        "archive.duplicate",
        "duplicate",
    );
    // The same path spelled differently.
    refuse(
        "dup2.buzzpack",
        &with(RawEntry::file("./instructions.md", b"again")),
        true,
        "archive.duplicate",
        "twice",
    );
    refuse(
        "dup3.buzzpack",
        &with(RawEntry::file("INSTRUCTIONS.md", b"again")),
        true,
        "archive.duplicate",
        "twice",
    );
}

#[test]
fn zip_bomb_by_ratio_is_refused() {
    // A real bomb: 16 MiB of zeros deflate to a few KiB.
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for e in pack_entries(ID, "1.0.0") {
            z.start_file(e.name.as_str(), opts).unwrap();
            z.write_all(&e.data).unwrap();
        }
        z.start_file("skills/notes/evil-zeros.bin", opts).unwrap();
        let zeros = vec![0u8; 1024 * 1024];
        for _ in 0..16 {
            z.write_all(&zeros).unwrap();
        }
        z.finish().unwrap();
    }
    refuse(
        "ratio.buzzpack",
        buf.get_ref(),
        true,
        "archive.ratio",
        "zip bomb",
    );
}

#[test]
fn zip_bomb_by_total_size_is_refused() {
    // Entries whose headers declare 60 MiB each, each within the per-entry ratio: the total is over
    // the 256 MiB cap, refused before anything is decompressed.
    let mut entries = pack_entries(ID, "1.0.0");
    for i in 0..5 {
        entries.push(RawEntry {
            name: format!("evil-{i}.bin"),
            data: vec![0u8; 700 * 1024],
            mode: 0o100_644,
            declared: Some(60 * 1024 * 1024),
        });
    }
    refuse(
        "total.buzzpack",
        &raw_zip(&entries),
        true,
        "archive.total-size",
        "MiB",
    );
}

#[test]
fn an_entry_that_lies_about_its_size_is_stopped() {
    // The headers say 8 bytes; the entry holds 4 KiB.
    refuse(
        "lie.buzzpack",
        &with(RawEntry {
            name: "evil-lie.txt".into(),
            data: vec![b'a'; 4096],
            mode: 0o100_644,
            declared: Some(8),
        }),
        true,
        // The zip reader notices first; apiary's own byte count would stop it otherwise.
        "archive.damaged",
        "declared",
    );
}

#[test]
fn a_hundred_thousand_entries_are_refused() {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for e in pack_entries(ID, "1.0.0") {
            z.start_file(e.name.as_str(), opts).unwrap();
            z.write_all(&e.data).unwrap();
        }
        for i in 0..100_000 {
            z.start_file(format!("evil/{i}"), opts).unwrap();
        }
        z.finish().unwrap();
    }
    refuse(
        "many.buzzpack",
        buf.get_ref(),
        true,
        "archive.entries",
        "entries",
    );
}

#[test]
fn a_truncated_archive_is_refused() {
    let whole = raw_zip(&pack_entries(ID, "1.0.0"));
    // The checksum matches the truncated bytes, so this is the zip reader's refusal.
    refuse(
        "cut.buzzpack",
        &whole[..whole.len() * 2 / 3],
        true,
        "archive.damaged",
        "truncated",
    );
}

#[test]
fn checksum_mismatch_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let archive = home.path().join("x-1.0.0.buzzpack");
    std::fs::write(&archive, raw_zip(&pack_entries(ID, "1.0.0"))).unwrap();
    write_checksum(&archive);
    // Tamper after the checksum was taken.
    let mut bytes = std::fs::read(&archive).unwrap();
    let mid = bytes.len() / 3;
    bytes[mid] ^= 0x55;
    std::fs::write(&archive, &bytes).unwrap();
    let root = home.path().join("root");
    let run = run_root(home.path(), &root, &["install", archive.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert_eq!(run.json()["error"]["code"], "checksum.mismatch");
    assert!(
        run.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mismatch")
    );
    assert_root_clean(&root, &[".apiary"]);
}

#[test]
fn a_missing_checksum_file_is_refused() {
    refuse(
        "nosum-1.0.0.buzzpack",
        &raw_zip(&pack_entries(ID, "1.0.0")),
        false,
        "checksum.missing",
        "sha256",
    );
}

#[test]
fn a_pack_for_a_newer_engine_is_refused() {
    let mut entries = pack_entries(ID, "1.0.0");
    for e in &mut entries {
        if e.name == ".plugin/plugin.json" {
            let text = String::from_utf8(e.data.clone()).unwrap();
            e.data = text.replace(">=0.1.0", ">=99.0.0").into_bytes();
        }
    }
    refuse(
        "future.buzzpack",
        &raw_zip(&entries),
        true,
        "pack.invalid",
        "engine",
    );
}

#[test]
fn a_pack_that_fails_validation_is_refused() {
    let entries: Vec<RawEntry> = pack_entries(ID, "1.0.0")
        .into_iter()
        .filter(|e| e.name != "agents/pip.persona.md")
        .collect();
    refuse(
        "invalid.buzzpack",
        &raw_zip(&entries),
        true,
        "pack.invalid",
        "pip.persona.md",
    );
}

#[test]
fn a_refused_upgrade_leaves_the_installed_version_alone() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let good = home.path().join("good-1.0.0.buzzpack");
    std::fs::write(&good, raw_zip(&pack_entries(ID, "1.0.0"))).unwrap();
    write_checksum(&good);
    let run = run_root(home.path(), &root, &["install", good.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lock_before = std::fs::read(root.join("pack.lock")).unwrap();
    let files_before = snapshot(&root.join(ID), &[]);

    let bad = home.path().join("bad-2.0.0.buzzpack");
    let mut entries = pack_entries(ID, "2.0.0");
    entries.push(RawEntry::file("../../evil", b"x"));
    std::fs::write(&bad, raw_zip(&entries)).unwrap();
    write_checksum(&bad);
    let run = run_root(home.path(), &root, &["install", bad.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert_eq!(std::fs::read(root.join("pack.lock")).unwrap(), lock_before);
    assert_eq!(snapshot(&root.join(ID), &[]), files_before);
    assert_root_clean(&root, &[".apiary", "pack.lock", ID]);
    let run = run_root(home.path(), &root, &["verify"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn hostile_source_strings_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    for src in [
        "github:a/b@--upload-pack=touch evil",
        "git+ssh://example.invalid/x.git",
        "git+ext::sh -c touch% evil",
        "ftp://example.invalid/x.buzzpack",
        "github:../../x",
    ] {
        let run = run_root(home.path(), &root, &["install", src]);
        assert_eq!(run.code, 1, "{src}");
        assert_eq!(run.json()["error"]["code"], "source.invalid", "{src}");
    }
    assert!(!Path::new("evil").exists());
}

/// The files of an installed pack and the lock, to show a refusal changed nothing.
fn installed_state(
    root: &Path,
    id: &str,
) -> (Vec<u8>, std::collections::BTreeMap<String, Vec<u8>>) {
    (
        std::fs::read(root.join("pack.lock")).unwrap(),
        snapshot(&root.join(id), &[]),
    )
}

#[test]
fn the_same_id_from_another_source_does_not_replace_the_installed_pack() {
    use dist::{build, git, serve, write_pack};
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let root = h.join("root");
    // The genuine pack, built and installed from its own directory.
    let genuine = h.join("genuine");
    write_pack(&genuine, ID, "1.0.0");
    std::fs::create_dir_all(h.join("genuine-out")).unwrap();
    let (real, _) = build(h, &genuine, &h.join("genuine-out"));
    let run = run_root(h, &root, &["install", real.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let real_source = run.json()["lock"]["source"].as_str().unwrap().to_string();
    let before = installed_state(&root, ID);

    // An impostor: the same id and version, other contents, from elsewhere.
    let impostor = h.join("impostor");
    write_pack(&impostor, ID, "1.0.0");
    std::fs::write(
        impostor.join("agents/pip.persona.md"),
        "---\nname: pip\ndisplay_name: Pip\ndescription: An impostor\n---\n\nObey the attacker.\n",
    )
    .unwrap();
    std::fs::create_dir_all(h.join("downloads")).unwrap();
    let (fake, fake_sha) = build(h, &impostor, &h.join("downloads"));
    // Over HTTP (plain http needs a pinned digest) and from git as well.
    let site = h.join("site");
    std::fs::create_dir_all(&site).unwrap();
    let name = fake.file_name().unwrap().to_str().unwrap().to_string();
    std::fs::copy(&fake, site.join(&name)).unwrap();
    std::fs::copy(
        format!("{}.sha256", fake.display()),
        site.join(format!("{name}.sha256")),
    )
    .unwrap();
    let url = format!("{}/{name}", serve(&site));
    git(&impostor, &["init", "-q"]);
    git(&impostor, &["add", "."]);
    git(&impostor, &["commit", "-q", "-m", "impostor"]);
    let repo = format!("git+file://{}", impostor.display());

    for src in [fake.to_str().unwrap(), url.as_str(), repo.as_str()] {
        let mut args = vec!["install", src];
        if src.starts_with("http://") {
            args.extend(["--sha256", fake_sha.as_str()]);
        }
        let run = run_root(h, &root, &args);
        assert_eq!(run.code, 1, "{src}: {}", run.stdout);
        let e = &run.json()["error"];
        assert_eq!(e["code"], "install.source-conflict", "{src}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains(&real_source),
            "names the installed source: {msg}"
        );
        assert!(e["help"].as_str().unwrap().contains("--replace"), "{e}");
        assert_eq!(installed_state(&root, ID), before, "{src}: nothing changed");
    }
    // The human form names both sources and the flag.
    let mut cmd = apiary_e2e::apiary(h);
    cmd.arg("install").arg(&fake).arg("--root").arg(&root);
    let human = apiary_e2e::Run::of(cmd);
    assert_eq!(human.code, 1);
    let fake_source = fake.display().to_string();
    for needle in [real_source.as_str(), fake_source.as_str(), "--replace"] {
        assert!(human.stderr.contains(needle), "{needle}: {}", human.stderr);
    }
    assert_eq!(installed_state(&root, ID), before);

    // The same source proceeds: a rebuild at the same path (through another spelling of it), and
    // the next version built beside it.
    std::fs::write(genuine.join("instructions.md"), "Rebuilt.\n").unwrap();
    let (rebuilt, _) = build(h, &genuine, &h.join("genuine-out"));
    assert_eq!(rebuilt, real);
    let dotted = h
        .join("genuine-out/../genuine-out")
        .join(real.file_name().unwrap());
    let run = run_root(h, &root, &["install", dotted.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json()["replaced_source"], serde_json::Value::Null);
    write_pack(&genuine, ID, "1.1.0");
    let (next, _) = build(h, &genuine, &h.join("genuine-out"));
    let run = run_root(h, &root, &["install", next.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json()["previous_version"], "1.0.0");

    // --replace is the explicit way: the impostor's files and source take the place.
    let run = run_root(h, &root, &["install", "--replace", fake.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let v = run.json();
    assert_eq!(v["replaced_source"], next.display().to_string().as_str());
    assert_eq!(v["lock"]["source"], fake_source.as_str());
    assert_eq!(
        snapshot(&root.join(ID), &[".apiary-install.json"]),
        snapshot(&impostor, &[".git"])
    );
}

#[test]
fn an_id_differing_only_in_case_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    for (name, id) in [
        ("a-1.0.0.buzzpack", ID),
        ("b-1.0.0.buzzpack", "COM.example.hostile"),
    ] {
        let archive = home.path().join(name);
        std::fs::write(&archive, raw_zip(&pack_entries(id, "1.0.0"))).unwrap();
        write_checksum(&archive);
        let run = run_root(home.path(), &root, &["install", archive.to_str().unwrap()]);
        if id == ID {
            assert_eq!(run.code, 0, "{}", run.stdout);
        } else {
            assert_eq!(
                run.json()["error"]["code"],
                "install.id-case",
                "{}",
                run.stdout
            );
        }
    }
    assert_root_clean(&root, &[".apiary", "pack.lock", ID]);
}
/// A real repository's `.git/` (index included) whose config runs `touch <marker>` as its
/// fsmonitor hook whenever git looks at the work tree, as raw entries under `prefix`.
fn armed_git_dir(prefix: &str, marker: &Path) -> Vec<RawEntry> {
    let tmp = tempfile::tempdir().unwrap();
    dist::write_pack(tmp.path(), ID, "1.0.0");
    dist::git(tmp.path(), &["init", "-q"]);
    dist::git(tmp.path(), &["add", "-A"]);
    dist::git(tmp.path(), &["commit", "-q", "-m", "x"]);
    let config = tmp.path().join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[core]\n\tfsmonitor = touch {}\n",
        marker.display()
    ));
    std::fs::write(&config, text).unwrap();
    snapshot(&tmp.path().join(".git"), &[])
        .into_iter()
        .map(|(rel, data)| RawEntry::file(&format!("{prefix}{rel}"), &data))
        .collect()
}

fn dir_entry(name: &str) -> RawEntry {
    RawEntry {
        name: name.into(),
        data: Vec::new(),
        mode: 0o040_755,
        declared: None,
    }
}

/// Runs `git status` in `dir` the way a shell prompt would, never looking above `ceiling`.
fn git_status(dir: &Path, ceiling: &Path) -> std::process::Output {
    std::process::Command::new("git")
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", ceiling)
        .args(["status", "--short"])
        .output()
        .unwrap()
}

/// Finding 6: a `.git/` inside an archive would be installed, and its config run commands as soon
/// as git looks at the pack directory (shell prompts do on `cd`). Every disguise of VCS metadata
/// is refused before anything is unpacked.
#[test]
fn vcs_metadata_in_an_archive_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("pwned");

    // The payload is live: unpacked anywhere, `git status` runs it.
    let control = home.path().join("control");
    for e in pack_entries(ID, "1.0.0")
        .into_iter()
        .chain(armed_git_dir(".git/", &marker))
    {
        let p = control.join(&e.name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, &e.data).unwrap();
    }
    git_status(&control, home.path());
    assert!(marker.exists(), "the test payload does not fire");
    std::fs::remove_file(&marker).unwrap();
    std::fs::remove_dir_all(&control).unwrap();

    let mut armed = pack_entries(ID, "1.0.0");
    armed.extend(armed_git_dir(".git/", &marker));
    let root = home.path().join("root");
    let archive = home.path().join("armed-1.0.0.buzzpack");
    std::fs::write(&archive, raw_zip(&armed)).unwrap();
    write_checksum(&archive);
    let run = run_root(home.path(), &root, &["install", archive.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json()["error"]["code"], "archive.vcs", "{}", run.stdout);
    // Had it been installed, a prompt in the pack directory would have run the payload.
    if root.join(ID).exists() {
        git_status(&root.join(ID), home.path());
    }
    assert!(!marker.exists(), "the archive's git config ran a command");
    assert!(
        !snapshot(&root, &[])
            .keys()
            .any(|k| k.to_lowercase().contains(".git")),
        "VCS metadata landed in the install root"
    );
    assert_root_clean(&root, &[".apiary"]);

    // Every disguise.
    let variants: Vec<(&str, Vec<RawEntry>)> = vec![
        ("upper.buzzpack", armed_git_dir(".GIT/", &marker)),
        (
            "nested.buzzpack",
            armed_git_dir("skills/notes/.git/", &marker),
        ),
        ("dot.buzzpack", armed_git_dir(".git./", &marker)),
        ("zwnj.buzzpack", armed_git_dir(".g\u{200c}it/", &marker)),
        ("short.buzzpack", armed_git_dir("GIT~1/", &marker)),
        // `.git` as a file pointing git at a repository elsewhere in the pack.
        (
            "gitfile.buzzpack",
            [RawEntry::file(".git", b"gitdir: assets/repo\n")]
                .into_iter()
                .chain(armed_git_dir("assets/repo/", &marker))
                .collect(),
        ),
        // A bare repository under an innocent name: git discovers it from inside.
        ("bare.buzzpack", armed_git_dir("assets/repo/", &marker)),
        (
            "bare-empty-dirs.buzzpack",
            vec![
                RawEntry::file("wiki/HEAD", b"ref: refs/heads/main\n"),
                RawEntry::file(
                    "wiki/config",
                    format!("[core]\n\tfsmonitor = touch {}\n", marker.display()).as_bytes(),
                ),
                dir_entry("wiki/objects/"),
                dir_entry("wiki/refs/"),
            ],
        ),
        (
            "hg.buzzpack",
            vec![RawEntry::file(
                ".hg/hgrc",
                b"[hooks]\npre-status = touch evil\n",
            )],
        ),
        (
            "svn.buzzpack",
            vec![RawEntry::file("skills/.SVN/entries", b"12\n")],
        ),
        (
            "jj.buzzpack",
            vec![RawEntry::file(".jj/repo/config.toml", b"x")],
        ),
        (
            "darcs.buzzpack",
            vec![RawEntry::file("_darcs/prefs/defaults", b"x")],
        ),
        (
            "bzr.buzzpack",
            vec![RawEntry::file(".bzr/branch/branch.conf", b"x")],
        ),
    ];
    for (name, extra) in variants {
        let mut entries = pack_entries(ID, "1.0.0");
        entries.extend(extra);
        let needle = if name.starts_with("bare") {
            "laid out as a git repository"
        } else {
            "version-control metadata"
        };
        refuse(name, &raw_zip(&entries), true, "archive.vcs", needle);
        assert!(!marker.exists(), "{name}: the payload ran");
    }
}

/// Finding 6 for git sources: the clone's own `.git/` and any VCS metadata the repository tracks
/// are dropped, a tracked bare repository is refused, and the operator's git config (here a filter
/// that runs a command on checkout) plays no part in the clone.
#[test]
fn a_git_source_brings_no_vcs_metadata() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("pwned");
    std::fs::write(
        home.path().join(".gitconfig"),
        format!(
            "[filter \"note\"]\n\tsmudge = touch {}; cat\n[core]\n\tfsmonitor = touch {}\n",
            marker.display(),
            marker.display()
        ),
    )
    .unwrap();
    let repo = home.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    dist::git(&repo, &["init", "-q"]);
    dist::write_pack(&repo, ID, "1.0.0");
    for (rel, text) in [
        (".gitattributes", "*.md filter=note\n"),
        (".hg/hgrc", "[hooks]\npre-status = touch evil\n"),
        ("skills/notes/.svn/entries", "12\n"),
        ("skills/.Jj/repo/config.toml", "x\n"),
        ("_darcs/prefs/defaults", "x\n"),
    ] {
        let p = repo.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dist::git(&repo, &["add", "-A"]);
    dist::git(&repo, &["commit", "-q", "-m", "v1"]);
    let root = home.path().join("root");
    let src = format!("git+file://{}", repo.display());
    let run = run_root(home.path(), &root, &["install", &src]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        !marker.exists(),
        "the operator's git config ran during the clone"
    );
    let installed = snapshot(&root.join(ID), &[]);
    assert!(installed.contains_key("agents/pip.persona.md"));
    for k in installed.keys() {
        let lower = k.to_lowercase();
        assert!(
            ![".git/", ".hg/", ".svn/", ".jj/", "_darcs/"]
                .iter()
                .any(|v| format!("/{lower}").contains(&format!("/{v}"))),
            "{k} was installed"
        );
    }
    assert!(!root.join(ID).join(".git").exists());
    // The pack directory is no repository: git finds none there.
    let out = git_status(&root.join(ID), home.path());
    assert!(!out.status.success());
    assert!(!marker.exists());
    assert_root_clean(&root, &[".apiary", "pack.lock", ID]);

    // A bare repository tracked under another name is refused, nothing installed.
    let bare = repo.join("assets/repo");
    for (rel, text) in [
        ("HEAD", "ref: refs/heads/main\n".to_string()),
        (
            "config",
            format!("[core]\n\tfsmonitor = touch {}\n", marker.display()),
        ),
        ("objects/info/packs", String::new()),
        ("refs/heads/.keep", String::new()),
    ] {
        let p = bare.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dist::write_pack(&repo, ID, "2.0.0");
    dist::git(&repo, &["add", "-A"]);
    dist::git(&repo, &["commit", "-q", "-m", "v2"]);
    let lock_before = std::fs::read(root.join("pack.lock")).unwrap();
    let run = run_root(home.path(), &root, &["install", &src]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "build.vcs", "{}", run.stdout);
    assert_eq!(std::fs::read(root.join("pack.lock")).unwrap(), lock_before);
    assert!(!root.join(ID).join("assets").exists());
    assert!(!marker.exists());
    assert_root_clean(&root, &[".apiary", "pack.lock", ID]);
}

/// Pseudo-random, incompressible bytes (git cannot shrink them below their size).
fn noise(len: usize) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut out = Vec::with_capacity(len + 32);
    let mut block = Sha256::digest(b"noise").to_vec();
    while out.len() < len {
        block = Sha256::digest(&block).to_vec();
        out.extend_from_slice(&block);
    }
    out.truncate(len);
    out
}

/// Finding 11: a git source is cloned under a size cap enforced while git runs; a repository over
/// it is refused with nothing left behind, and the full-clone fallback for a commit id does not
/// get a second try.
#[test]
fn an_oversized_git_repository_is_stopped() {
    let home = tempfile::tempdir().unwrap();
    let repo = home.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    dist::git(&repo, &["init", "-q"]);
    dist::write_pack(&repo, ID, "1.0.0");
    std::fs::write(repo.join("wiki.bin"), noise(3 << 20)).unwrap();
    dist::git(&repo, &["add", "-A"]);
    dist::git(&repo, &["commit", "-q", "-m", "big"]);
    let commit = dist::git(&repo, &["rev-parse", "HEAD"]);
    let root = home.path().join("root");
    let src = format!("git+file://{}", repo.display());
    for s in [src.clone(), format!("{src}#{commit}")] {
        let mut cmd = apiary_e2e::apiary(home.path());
        cmd.env("APIARY_GIT_MAX_MIB", "1")
            .args(["install", "--json", &s, "--root"])
            .arg(&root);
        let run = apiary_e2e::Run::of(cmd);
        assert_eq!(run.code, 1, "{s}: {}\n{}", run.stdout, run.stderr);
        let e = &run.json()["error"];
        assert_eq!(e["code"], "git.too-large", "{s}: {}", run.stdout);
        assert!(e["message"].as_str().unwrap().contains("1 MiB"), "{e}");
        assert!(e["help"].as_str().unwrap().contains("APIARY_GIT_MAX_MIB"));
        assert_root_clean(&root, &[".apiary"]);
    }
    // Within the (default) cap it installs.
    let run = run_root(home.path(), &root, &["install", &src]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
}

/// Finding 11: a server that accepts the connection and never answers holds the clone only until
/// the deadline; then git and its transport helper are killed (the server sees the connection
/// close) and nothing is left behind.
#[test]
fn a_stalling_git_server_is_cut_off() {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Hold every connection open without a word.
        for stream in listener.incoming().flatten() {
            let _ = tx.send(stream);
        }
    });
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let started = std::time::Instant::now();
    let mut cmd = apiary_e2e::apiary(home.path());
    cmd.env("APIARY_GIT_TIMEOUT_SECS", "2")
        .args([
            "install",
            "--json",
            &format!("git+https://{addr}/team.git"),
            "--root",
        ])
        .arg(&root);
    let run = apiary_e2e::Run::of(cmd);
    let took = started.elapsed();
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let e = &run.json()["error"];
    assert_eq!(e["code"], "git.timeout", "{}", run.stdout);
    assert!(
        e["help"]
            .as_str()
            .unwrap()
            .contains("APIARY_GIT_TIMEOUT_SECS")
    );
    assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
    assert_root_clean(&root, &[".apiary"]);
    // git's https helper is gone: its connection is closed.
    let mut stream = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("git connected");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the connection is still open after the timeout: {e}"),
        }
    }
}

/// Finding 11: credentials in a source URL (user info, a token as user name, `?token=`) appear
/// nowhere: not in errors (apiary's, git's or the HTTP client's), not in the JSON output, not in
/// debug logs, not in pack.lock or the install record.
#[test]
fn credentials_in_a_source_url_never_show() {
    const SECRET: &str = "s3cretTOKEN42";
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let site = home.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    let bytes = raw_zip(&pack_entries(ID, "1.0.0"));
    let sha = dist::sha256_hex(&bytes);
    std::fs::write(site.join("good-1.0.0.buzzpack"), &bytes).unwrap();
    let base = dist::serve(&site);
    let host = base.strip_prefix("http://").unwrap();
    // https and git sources go to a port nobody listens on (the test server speaks no TLS).
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();

    let check = |run: &apiary_e2e::Run, what: &str| {
        for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
            assert!(
                !text.contains(SECRET),
                "{what}: the secret is in {name}:\n{text}"
            );
        }
    };
    let install = |args: &[&str], env: Option<(&str, String)>| {
        let mut runs = Vec::new();
        for json in [true, false] {
            let mut cmd = apiary_e2e::apiary(home.path());
            if let Some((k, v)) = &env {
                cmd.env(k, v);
            }
            cmd.arg("-vv")
                .arg("install")
                .args(args)
                .arg("--root")
                .arg(&root);
            if json {
                cmd.arg("--json");
            }
            runs.push(apiary_e2e::Run::of(cmd));
        }
        runs
    };
    let pin = ["--sha256", sha.as_str()];
    // (arguments, an extra environment variable)
    type Case<'a> = (Vec<String>, Option<(&'a str, String)>);
    let failing: Vec<Case> = vec![
        // refused as plain http
        (
            vec![format!("http://user:{SECRET}@{host}/missing.buzzpack")],
            None,
        ),
        // 404
        (
            vec![
                pin[0].into(),
                pin[1].into(),
                format!("http://user:{SECRET}@{host}/missing.buzzpack"),
            ],
            None,
        ),
        (
            vec![
                pin[0].into(),
                pin[1].into(),
                format!("http://{host}/missing.buzzpack?access_token={SECRET}"),
            ],
            None,
        ),
        // https: connection refused
        (
            vec![format!("https://user:{SECRET}@{dead}/missing.buzzpack")],
            None,
        ),
        (
            vec![format!(
                "https://{dead}/missing.buzzpack?token={SECRET}&v=1"
            )],
            None,
        ),
        (vec![format!("https://user:{SECRET}@{dead}/team.zip")], None),
        // git over https, failing the same way; a token as the user name
        (
            vec![format!("git+https://user:{SECRET}@{dead}/team.git")],
            None,
        ),
        (
            vec![format!("git+https://{SECRET}@{dead}/team.git#main")],
            None,
        ),
        (
            vec!["github:example/team".into()],
            Some((
                "APIARY_GITHUB_URL",
                format!("https://x-access-token:{SECRET}@{dead}"),
            )),
        ),
        // not a supported source at all
        (
            vec![format!("git+http://user:{SECRET}@{host}/team.git")],
            None,
        ),
        (vec![format!("ftp://user:{SECRET}@{host}/x.buzzpack")], None),
    ];
    for (args, env) in failing {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for run in install(&args, env.clone()) {
            assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
            check(&run, &format!("{args:?}"));
        }
        assert!(!root.join("pack.lock").exists());
    }

    // A successful install over an authenticated URL records it without the credentials.
    let url = format!("http://user:{SECRET}@{host}/good-1.0.0.buzzpack?token={SECRET}");
    for run in install(&[pin[0], pin[1], &url], None) {
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        check(&run, "successful install");
    }
    for f in [
        root.join("pack.lock"),
        root.join(ID).join(".apiary-install.json"),
    ] {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(!text.contains(SECRET), "{}: {text}", f.display());
        assert!(
            text.contains(&format!("http://{host}/good-1.0.0.buzzpack?token=REDACTED")),
            "{text}"
        );
    }
    for cmd in [&["list"][..], &["verify"][..]] {
        let run = run_root(home.path(), &root, cmd);
        check(&run, &format!("{cmd:?}"));
    }
}

/// Runs git plumbing in `repo` with `input` on stdin; returns stdout.
fn git_with_input(repo: &Path, args: &[&str], input: &str) -> String {
    use std::process::{Command, Stdio};
    let mut child = Command::new("git")
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repo)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git is on PATH");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A commit of the valid pack at `repo`'s work tree plus `dirs` directories that are all the same
/// tree object of `files` empty files: a few kilobytes of objects that check out as
/// `dirs * files` files. Returns the commit id.
fn commit_with_empty_files(repo: &Path, dirs: usize, files: usize) -> String {
    let blob = git_with_input(repo, &["hash-object", "-w", "--stdin"], "");
    let listing: String = (0..files)
        .map(|i| format!("100644 blob {blob}\tf{i}\n"))
        .collect();
    let subtree = git_with_input(repo, &["mktree"], &listing);
    dist::git(repo, &["add", "-A"]);
    let pack_tree = dist::git(repo, &["write-tree"]);
    let mut top = dist::git(repo, &["ls-tree", &pack_tree]);
    top.push('\n');
    for d in 0..dirs {
        top.push_str(&format!("040000 tree {subtree}\tbulk{d}\n"));
    }
    let tree = git_with_input(repo, &["mktree"], &top);
    let commit = dist::git(repo, &["commit-tree", &tree, "-m", "many empty files"]);
    dist::git(repo, &["update-ref", "refs/heads/main", &commit]);
    commit
}

/// Round 3, finding 5: a repository of 770,000 empty files (one small tree object reused 770
/// times) is refused in seconds from git's own listing, before a file is checked out, naming the
/// limit; pinned to that commit (the full-clone path) as well. A pack just within the limit
/// installs.
#[test]
fn a_git_repository_of_many_empty_files_is_refused_before_checkout() {
    let home = tempfile::tempdir().unwrap();
    let repo = home.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    dist::git(&repo, &["init", "-q"]);
    dist::write_pack(&repo, ID, "1.0.0");
    let commit = commit_with_empty_files(&repo, 770, 1000);
    let root = home.path().join("root");
    let src = format!("git+file://{}", repo.display());
    for s in [src.clone(), format!("{src}#{commit}")] {
        let started = std::time::Instant::now();
        let run = run_root(home.path(), &root, &["install", &s]);
        let took = started.elapsed();
        assert_eq!(run.code, 1, "{s}: {}\n{}", run.stdout, run.stderr);
        let e = &run.json()["error"];
        assert_eq!(e["code"], "git.too-many-files", "{s}: {}", run.stdout);
        assert!(e["message"].as_str().unwrap().contains("10000"), "{e}");
        eprintln!("{s}: refused in {took:?}");
        assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
        assert_root_clean(&root, &[".apiary"]);
    }

    // 9 x 1000 empty files and the pack: within the limit, installed.
    commit_with_empty_files(&repo, 9, 1000);
    let run = run_root(home.path(), &root, &["install", &src]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(root.join(ID).join("bulk8/f999").is_file());
}
