//! Helpers for the distribution tests (`dist_*`, and any test that builds or installs a pack):
//! scratch packs, builds, the install root's records, raw (hostile) zips, a tiny HTTP file server
//! on 127.0.0.1, git repositories in temp dirs.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use apiary_e2e::{Run, apiary, snapshot, write_tree};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A small valid pack with one script hook. `version` also shows up in file contents, so two
/// versions differ in bytes.
pub fn write_pack(dir: &Path, id: &str, version: &str) {
    let manifest = format!(
        r#"{{
  "id": "{id}",
  "name": "Test Pack",
  "version": "{version}",
  "description": "A pack for distribution tests",
  "engines": {{ "buzz": ">=0.1.0" }},
  "personas": ["agents/pip.persona.md"],
  "hooks_config": "hooks/hooks.json"
}}
"#
    );
    let persona = format!(
        "---\nname: pip\ndisplay_name: Pip\ndescription: A test persona, version {version}\n---\n\nYou are Pip ({version}).\n"
    );
    let hook = format!("#!/bin/sh\necho setting up {version}\n");
    let instructions = format!("Team instructions for {version}.\n");
    write_tree(
        dir,
        &[
            (".plugin/plugin.json", &manifest),
            ("agents/pip.persona.md", &persona),
            (
                "hooks/hooks.json",
                r#"{ "on_start": "./hooks/setup.sh", "on_stop": null, "on_message": null }"#,
            ),
            ("hooks/setup.sh", &hook),
            ("instructions.md", &instructions),
            (
                "skills/notes/SKILL.md",
                "---\nname: notes\ndescription: Take notes\n---\nWrite things down.\n",
            ),
        ],
    );
}

/// The install root's `pack.lock`.
pub fn lock(root: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(root.join("pack.lock")).unwrap()).unwrap()
}

/// The install root's trust store.
pub fn trust_store(root: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(root.join(".apiary/trust.json")).unwrap()).unwrap()
}

/// Runs `apiary pack build <pack> --output <out> --json` and returns (archive, sha256).
pub fn build(home: &Path, pack: &Path, out: &Path) -> (PathBuf, String) {
    let mut cmd = apiary(home);
    cmd.args(["pack", "build", "--json", "--output"])
        .arg(out)
        .arg(pack);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "build failed: {}\n{}", run.stdout, run.stderr);
    let v = run.json();
    (
        PathBuf::from(v["build"]["archive"].as_str().unwrap()),
        v["build"]["sha256"].as_str().unwrap().to_string(),
    )
}

/// `apiary <args> --root <root> --json`.
pub fn run_root(home: &Path, root: &Path, args: &[&str]) -> Run {
    let mut cmd = apiary(home);
    cmd.args(args).arg("--root").arg(root).arg("--json");
    Run::of(cmd)
}

/// Writes `<archive>.sha256` for whatever bytes `archive` holds.
pub fn write_checksum(archive: &Path) {
    let bytes = std::fs::read(archive).unwrap();
    let name = archive.file_name().unwrap().to_string_lossy();
    std::fs::write(
        format!("{}.sha256", archive.display()),
        format!("{}  {name}\n", sha256_hex(&bytes)),
    )
    .unwrap();
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One stored entry of a hand-made zip. `declared` overrides the uncompressed size written in the
/// headers (to make an archive that lies).
pub struct RawEntry {
    pub name: String,
    pub data: Vec<u8>,
    /// Full Unix mode (type bits included), e.g. 0o100644, 0o120777 for a symlink.
    pub mode: u32,
    pub declared: Option<u32>,
}

impl RawEntry {
    pub fn file(name: &str, data: &[u8]) -> RawEntry {
        RawEntry {
            name: name.into(),
            data: data.to_vec(),
            mode: 0o100_644,
            declared: None,
        }
    }
}

/// A zip written byte by byte (stored entries only), so tests can express what well-behaved
/// writers refuse to produce: `..` names, duplicates, symlinks, devices, lying sizes.
pub fn raw_zip(entries: &[RawEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let offset = out.len() as u32;
        let crc = crc32(&e.data);
        let csize = e.data.len() as u32;
        let usize_ = e.declared.unwrap_or(csize);
        let name = e.name.as_bytes();
        // local header
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&0x0800u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes()); // stored
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&0x0021u16.to_le_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&csize.to_le_bytes());
        out.extend_from_slice(&usize_.to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&e.data);
        // central directory header
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&0x031Eu16.to_le_bytes()); // made by Unix, spec 3.0
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&0x0800u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0x0021u16.to_le_bytes());
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&csize.to_le_bytes());
        central.extend_from_slice(&usize_.to_le_bytes());
        central.extend_from_slice(&(name.len() as u16).to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&(e.mode << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name);
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// The files of a valid pack as raw entries (to mix hostile entries into).
pub fn pack_entries(id: &str, version: &str) -> Vec<RawEntry> {
    let tmp = tempfile::tempdir().unwrap();
    write_pack(tmp.path(), id, version);
    snapshot(tmp.path(), &[])
        .into_iter()
        .map(|(name, data)| RawEntry::file(&name, &data))
        .collect()
}

/// Serves the files of `dir` over HTTP/1.1 on 127.0.0.1 (GET only, 404 for anything missing) from
/// a background thread for the life of the test process. Returns the base URL.
pub fn serve(dir: &Path) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let dir = dir.clone();
            std::thread::spawn(move || {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 * 1024 {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&req);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                // The query string (a signed link's token) does not name the file.
                let rel = path.split('?').next().unwrap_or("").trim_start_matches('/');
                let file = dir.join(rel);
                let body = if rel.split('/').any(|p| p == "..") {
                    None
                } else {
                    std::fs::read(&file).ok()
                };
                let _ = match body {
                    Some(b) => stream
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                                b.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|()| stream.write_all(&b)),
                    None => stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found",
                    ),
                };
            });
        }
    });
    format!("http://{addr}")
}

/// Runs git in `dir` with a fixed identity; panics on failure; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .args([
            "-c",
            "user.name=apiary tests",
            "-c",
            "user.email=tests@example.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("git is on PATH");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether the root holds no scratch leftovers and nothing but what `expected` lists at top level.
pub fn assert_root_clean(root: &Path, expected_top: &[&str]) {
    let mut top: Vec<String> = std::fs::read_dir(root)
        .map(|es| {
            es.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    top.sort();
    let mut want: Vec<String> = expected_top.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(top, want, "unexpected entries in {}", root.display());
    for d in ["staging", "old", "trash"] {
        let p = root.join(".apiary").join(d);
        if p.exists() {
            let n = std::fs::read_dir(&p).unwrap().count();
            assert_eq!(n, 0, "{} is not empty", p.display());
        }
    }
    assert!(!root.join(".apiary/journal.json").exists());
}
