//! Packs from strangers you can check: an author signs an archive (`pack build --sign-with`,
//! `pack sign`), publishes it (`publish`: the archive to the blob server `apiary relay --blobs`
//! runs on its port, the signed NIP-94 event to that relay and to nostr-rs-relay), and an operator
//! on a fresh machine finds it (`search`), installs it by id (`install <id> --relay`) and
//! `verify`s it, its author pinned. Each way a stranger or a hostile server could slip in another
//! pack is refused with its own error code, and the legitimate path keeps working beside it.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use apiary_e2e::{Run, apiary, run};

use crate::support::live::relays::{External, Kind, Options, TestRelay};
use crate::support::pack::pack_new;

const ID: &str = "com.example.crew";

/// `apiary relay --listen 127.0.0.1:0 --ephemeral --blobs <dir>`: its relay and blob URLs.
struct BlobRelay {
    child: Child,
    url: String,
    blobs: String,
    dir: PathBuf,
}

impl BlobRelay {
    fn start(home: &Path, extra: &[&str]) -> BlobRelay {
        let dir = home.join("blobs");
        let mut child = apiary(home)
            .args(["relay", "--listen", "127.0.0.1:0", "--ephemeral", "--blobs"])
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut field = |name: &str| loop {
            let line = lines.next().expect("the relay's stdout").unwrap();
            if let Some(v) = line.strip_prefix(name) {
                return v.to_string();
            }
        };
        let url = field("relay ");
        let blobs = field("blobs ");
        BlobRelay {
            child,
            url,
            blobs,
            dir,
        }
    }

    /// The stored blob `sha256`.
    fn blob(&self, sha256: &str) -> PathBuf {
        self.dir.join(sha256)
    }
}

impl Drop for BlobRelay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An author: a home with an author key and a pack `com.example.crew` made with `pack new`.
struct Author {
    home: tempfile::TempDir,
}

impl Author {
    fn new() -> Author {
        let author = Author {
            home: tempfile::tempdir().unwrap(),
        };
        pack_new(author.h(), &author.pack(), ID, &["scout"]);
        let made = author.run(&["keys", "new", "--author", "--json"]);
        assert_eq!(made.code, 0, "{}", made.stderr);
        assert_eq!(made.json()["keys"][0]["role"], "author");
        assert!(author.key().is_file());
        author
    }

    fn h(&self) -> &Path {
        self.home.path()
    }

    fn pack(&self) -> PathBuf {
        self.h().join("crew")
    }

    fn key(&self) -> PathBuf {
        apiary_e2e::data_dir(self.h()).join("keys/author.key")
    }

    fn npub(&self) -> String {
        let listed = self.run(&["keys", "list", "--json"]).json();
        listed["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["role"] == "author")
            .unwrap()["npub"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn run(&self, args: &[&str]) -> Run {
        run(self.h(), args)
    }

    /// Sets the pack's version and builds it (signed with `key` when given) into `out/`.
    fn build(&self, version: &str, key: Option<&Path>) -> PathBuf {
        let manifest = self.pack().join(".plugin/plugin.json");
        let mut m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
        m["version"] = version.into();
        std::fs::write(&manifest, serde_json::to_string_pretty(&m).unwrap()).unwrap();
        let out = self.h().join("out");
        std::fs::create_dir_all(&out).unwrap();
        let (pack, out_s) = (self.pack(), out.to_str().unwrap().to_string());
        let mut args = vec![
            "pack",
            "build",
            pack.to_str().unwrap(),
            "-o",
            &out_s,
            "--json",
        ];
        let key_s = key.map(|k| k.to_str().unwrap().to_string());
        if let Some(k) = &key_s {
            args.extend(["--sign-with", k]);
        }
        let built = self.run(&args);
        assert_eq!(built.code, 0, "{}", built.stderr);
        PathBuf::from(built.json()["build"]["archive"].as_str().unwrap())
    }

    fn publish(&self, archive: &Path, key: &Path, relays: &[&str], blobs: &str) -> Run {
        let mut args = vec![
            "publish",
            archive.to_str().unwrap(),
            "--sign-with",
            key.to_str().unwrap(),
            "--blobs",
            blobs,
            "--json",
        ];
        for r in relays {
            args.extend(["--relay", r]);
        }
        self.run(&args)
    }
}

/// `apiary install <what> --relay <relay> --json [extra]` in `home`.
fn install_by_id(home: &Path, what: &str, relay: &str, extra: &[&str]) -> Run {
    let mut args = vec!["install", what, "--relay", relay, "--json"];
    args.extend_from_slice(extra);
    run(home, &args)
}

fn error_code(r: &Run) -> String {
    let v = r.json();
    assert_eq!(v["ok"], false, "{}", r.stdout);
    v["error"]["code"].as_str().unwrap().to_string()
}

#[test]
fn a_signed_pack_is_published_found_installed_by_id_and_verified_with_its_author_pinned() {
    let author = Author::new();
    let relay = BlobRelay::start(author.h(), &[]);
    let Some(nostr_rs) = TestRelay::start(Kind::NostrRs, author.h(), Options::default()) else {
        return;
    };
    let nostr_rs = nostr_rs.external.unwrap();

    let archive = author.build("0.1.0", Some(&author.key()));
    let published = author.publish(
        &archive,
        &author.key(),
        &[&relay.url, &nostr_rs.url],
        &relay.blobs,
    );
    assert_eq!(published.code, 0, "{}", published.stderr);
    let p = published.json();
    assert_eq!(p["author"], author.npub().as_str());
    assert_eq!(p["relays"].as_array().unwrap().len(), 2, "{p}");
    let sha256 = p["sha256"].as_str().unwrap().to_string();
    assert!(relay.blob(&sha256).is_file(), "the blob server holds it");

    found_by_search_on_both_relays(&author, &relay.url, &nostr_rs);
    let operator = tempfile::tempdir().unwrap();
    installed_by_id_and_verified(operator.path(), &nostr_rs.url, &author);
    another_authors_upgrade_is_refused_then_accepted_with_replace_author(
        operator.path(),
        &author,
        &relay,
        &nostr_rs,
    );
}

fn found_by_search_on_both_relays(author: &Author, embedded: &str, nostr_rs: &External) {
    for url in [embedded, nostr_rs.url.as_str()] {
        let found = author.run(&["search", "persona", "--relay", url, "--json"]);
        assert_eq!(found.code, 0, "{}", found.stderr);
        let packs = found.json()["packs"].as_array().unwrap().clone();
        assert_eq!(packs.len(), 1, "{url}: {packs:?}");
        assert_eq!(packs[0]["pack_id"], ID);
        assert_eq!(packs[0]["version"], "0.1.0");
        assert_eq!(packs[0]["author"], author.npub().as_str());
        assert!(packs[0]["published_at"].as_str().unwrap().ends_with('Z'));
        let none = author.run(&["search", "no-such-word", "--relay", url, "--json"]);
        assert_eq!(none.json()["packs"], serde_json::json!([]), "{url}");
    }
    let shown = author.run(&["search", "--relay", embedded]);
    assert!(
        shown.stdout.contains(&format!("{ID} 0.1.0  by npub1")),
        "{}",
        shown.stdout
    );
}

/// On a fresh machine: found on nostr-rs-relay (which holds the event only), downloaded from the
/// blob server the event names, its author pinned (named up front with `--author`: another key
/// is refused even on a first install); `list` and `verify` show it.
fn installed_by_id_and_verified(operator: &Path, relay: &str, author: &Author) {
    let someone = "npub1w06c8w3qcacd4ntrct8dspt6vcx48hkv4zxq0frmkkqd45xex6yqs4yynh";
    let refused = install_by_id(operator, ID, relay, &["--author", someone]);
    assert_eq!(
        error_code(&refused),
        "signature.author-changed",
        "--author is a pin from the start"
    );
    let npub = author.npub();
    let installed = install_by_id(operator, ID, relay, &["--author", &npub]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let v = installed.json();
    assert_eq!(v["version"], "0.1.0");
    assert_eq!(v["author"], author.npub().as_str());
    assert_eq!(v["lock"]["source"], format!("nostr:{ID}"));
    assert_eq!(v["lock"]["author"], author.npub().as_str());
    let verified = run(operator, &["verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
    assert!(
        verified
            .stderr
            .contains(&format!("signed by {}", author.npub())),
        "{}",
        verified.stderr
    );
    let listed = run(operator, &["list", "--json"]).json();
    assert_eq!(listed["packs"][0]["author"], author.npub().as_str());
}

/// 0.2.0 signed by a stranger: asked for by version it is refused (`signature.author-changed`);
/// unversioned, the pinned author's newest is what installs; `--replace-author` takes the new one
/// and pins its key.
fn another_authors_upgrade_is_refused_then_accepted_with_replace_author(
    operator: &Path,
    author: &Author,
    relay: &BlobRelay,
    nostr_rs: &External,
) {
    let stranger = tempfile::tempdir().unwrap();
    let made = run(stranger.path(), &["keys", "new", "--author", "--json"]);
    let stranger_key = PathBuf::from(made.json()["author_key"].as_str().unwrap());
    let stranger_npub = made.json()["keys"][0]["npub"].as_str().unwrap().to_string();
    let archive = author.build("0.2.0", None);
    let published = author.publish(&archive, &stranger_key, &[&nostr_rs.url], &relay.blobs);
    assert_eq!(published.code, 0, "{}", published.stderr);

    let refused = install_by_id(operator, &format!("{ID}@0.2.0"), &nostr_rs.url, &[]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert_eq!(error_code(&refused), "signature.author-changed");
    let kept = run(operator, &["list", "--json"]).json();
    assert_eq!(kept["packs"][0]["version"], "0.1.0", "nothing installed");

    let pinned_newest = install_by_id(operator, ID, &nostr_rs.url, &[]);
    assert_eq!(pinned_newest.code, 0, "{}", pinned_newest.stderr);
    assert_eq!(pinned_newest.json()["version"], "0.1.0");

    let replaced = install_by_id(
        operator,
        &format!("{ID}@0.2.0"),
        &nostr_rs.url,
        &["--replace-author"],
    );
    assert_eq!(replaced.code, 0, "{}", replaced.stderr);
    assert_eq!(replaced.json()["author"], stranger_npub.as_str());
}

#[test]
fn blob_servers_sending_other_bytes_or_too_many_install_nothing() {
    let author = Author::new();
    let relay = BlobRelay::start(author.h(), &[]);
    let archive = author.build("0.1.0", None);
    let published = author.publish(&archive, &author.key(), &[&relay.url], &relay.blobs);
    assert_eq!(published.code, 0, "{}", published.stderr);
    let sha256 = published.json()["sha256"].as_str().unwrap().to_string();
    let genuine = std::fs::read(relay.blob(&sha256)).unwrap();
    let operator = tempfile::tempdir().unwrap();

    // The server's copy altered (same length): the bytes do not hash to the signed sha256.
    let mut altered = genuine.clone();
    let last = altered.len() - 1;
    altered[last] ^= 0xff;
    std::fs::write(relay.blob(&sha256), &altered).unwrap();
    let refused = install_by_id(operator.path(), ID, &relay.url, &[]);
    assert_eq!(
        error_code(&refused),
        "blob.digest-mismatch",
        "{}",
        refused.stdout
    );

    // A blob far larger than the signed size: refused before it is read whole.
    let huge = vec![0u8; genuine.len() * 64 + 1_000_000];
    std::fs::write(relay.blob(&sha256), &huge).unwrap();
    let refused = install_by_id(operator.path(), ID, &relay.url, &[]);
    assert_eq!(error_code(&refused), "blob.too-large", "{}", refused.stdout);
    let listed = run(operator.path(), &["list", "--json"]).json();
    assert_eq!(listed["packs"], serde_json::json!([]), "nothing installed");

    // The genuine bytes back: the same install goes through.
    std::fs::write(relay.blob(&sha256), &genuine).unwrap();
    let installed = install_by_id(operator.path(), ID, &relay.url, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
}

#[test]
fn the_blob_server_takes_only_authorised_uploads_within_its_caps() {
    let author = Author::new();
    let relay = BlobRelay::start(author.h(), &["--blobs-max-bytes", "1024"]);
    let archive = author.build("0.1.0", None);
    // Archives of a fresh pack are under 4 KiB but over 1 KiB: too large for this server.
    let too_big = author.publish(&archive, &author.key(), &[&relay.url], &relay.blobs);
    assert_eq!(error_code(&too_big), "blob.upload", "{}", too_big.stdout);
    assert!(too_big.stdout.contains("413"), "{}", too_big.stdout);
    // No authorisation at all.
    let put = ureq_put(&format!("{}/upload", relay.blobs), b"hello", None);
    assert_eq!(put.0, 401, "{put:?}");
    assert!(put.1.contains("Authorization"), "{put:?}");
    // A GET of something that is not a sha256, and of one it does not hold.
    assert_eq!(
        http_get_status(&format!("{}/../../etc/passwd", relay.blobs)),
        404
    );
    assert_eq!(
        http_get_status(&format!("{}/{}", relay.blobs, "0".repeat(64))),
        404
    );
}

/// `(status, X-Reason)` of a raw HTTP PUT (std only, so the test depends on no HTTP client).
fn ureq_put(url: &str, body: &[u8], auth: Option<&str>) -> (u16, String) {
    let (addr, path) = split_http(url);
    let mut head = format!(
        "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(a) = auth {
        head.push_str(&format!("Authorization: {a}\r\n"));
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    let answer = raw_http(&addr, &request);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let reason = answer
        .lines()
        .find_map(|l| l.strip_prefix("X-Reason: "))
        .unwrap_or("")
        .to_string();
    (status, reason)
}

fn http_get_status(url: &str) -> u16 {
    let (addr, path) = split_http(url);
    let answer = raw_http(
        &addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn split_http(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_once('/').unwrap_or((rest, ""));
    (addr.to_string(), format!("/{path}"))
}

fn raw_http(addr: &str, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

#[test]
fn signatures_beside_archives_are_checked_and_the_author_pinned() {
    let author = Author::new();
    let operator = tempfile::tempdir().unwrap();
    let op = operator.path();
    let install = |archive: &Path, extra: &[&str]| {
        let mut args = vec!["install", archive.to_str().unwrap(), "--json"];
        args.extend_from_slice(extra);
        run(op, &args)
    };

    // Unsigned: refused under --require-signed and under the overrides file's require_signed;
    // otherwise installed with a warning.
    let unsigned = author.build("0.1.0", None);
    assert_eq!(
        error_code(&install(&unsigned, &["--require-signed"])),
        "signature.missing"
    );
    let overrides = op.join("overrides.toml");
    std::fs::write(&overrides, "require_signed = true\n").unwrap();
    let by_file = install(&unsigned, &["--overrides", overrides.to_str().unwrap()]);
    assert_eq!(error_code(&by_file), "signature.missing");
    let warned = run(op, &["install", unsigned.to_str().unwrap()]);
    assert_eq!(warned.code, 0, "{}", warned.stderr);
    assert!(warned.stderr.contains("is not signed"), "{}", warned.stderr);

    // Signed with `pack sign`: installed, the author pinned (replacing an unsigned install).
    let signed = author.run(&[
        "pack",
        "sign",
        unsigned.to_str().unwrap(),
        "--sign-with",
        author.key().to_str().unwrap(),
    ]);
    assert_eq!(signed.code, 0, "{}", signed.stderr);
    let ok = install(&unsigned, &["--require-signed"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(ok.json()["author"], author.npub().as_str());

    // The archive changed after signing (its .sha256 redone to match): refused.
    let tampered = author.build("0.2.0", Some(&author.key()));
    let bytes = std::fs::read(&tampered).unwrap();
    let mut changed = bytes.clone();
    changed.extend_from_slice(b"\0");
    std::fs::write(&tampered, &changed).unwrap();
    rewrite_checksum(&tampered);
    assert_eq!(
        error_code(&install(&tampered, &[])),
        "signature.digest-mismatch"
    );

    // The signature edited to name another version: it no longer verifies.
    std::fs::write(&tampered, &bytes).unwrap();
    rewrite_checksum(&tampered);
    let sig = PathBuf::from(format!("{}.sig.json", tampered.display()));
    let genuine_sig = std::fs::read_to_string(&sig).unwrap();
    std::fs::write(&sig, genuine_sig.replace("0.2.0", "0.9.0")).unwrap();
    assert_eq!(error_code(&install(&tampered, &[])), "signature.invalid");

    // Re-signed by a stranger's key: the author pinned for the id refuses it.
    std::fs::remove_file(&sig).unwrap();
    let stranger = tempfile::tempdir().unwrap();
    let made = run(stranger.path(), &["keys", "new", "--author", "--json"]);
    let stranger_key = made.json()["author_key"].as_str().unwrap().to_string();
    let resigned = author.run(&[
        "pack",
        "sign",
        tampered.to_str().unwrap(),
        "--sign-with",
        &stranger_key,
    ]);
    assert_eq!(resigned.code, 0, "{}", resigned.stderr);
    assert_eq!(
        error_code(&install(&tampered, &[])),
        "signature.author-changed"
    );
    // ... and the signature stripped: an unsigned upgrade of a signed pack is refused too.
    std::fs::remove_file(&sig).unwrap();
    assert_eq!(error_code(&install(&tampered, &[])), "signature.unsigned");
    let listed = run(op, &["list", "--json"]).json();
    assert_eq!(
        listed["packs"][0]["version"], "0.1.0",
        "still the signed 0.1.0"
    );

    // Signed again by the author: the upgrade goes through.
    std::fs::write(&sig, &genuine_sig).unwrap();
    let upgraded = install(&tampered, &[]);
    assert_eq!(upgraded.code, 0, "{}", upgraded.stderr);
    assert_eq!(upgraded.json()["previous_version"], "0.1.0");

    // A key file others can read is not used to sign.
    let key = author.key();
    let open = author.h().join("open.key");
    std::fs::copy(&key, &open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = author.run(&[
        "pack",
        "sign",
        tampered.to_str().unwrap(),
        "--sign-with",
        open.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(error_code(&refused), "signature.key");
}

fn rewrite_checksum(archive: &Path) {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(std::fs::read(archive).unwrap());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let name = archive.file_name().unwrap().to_str().unwrap();
    std::fs::write(
        format!("{}.sha256", archive.display()),
        format!("{hex}  {name}\n"),
    )
    .unwrap();
}

/// A relay that answers every `REQ` with the events it was given, then `EOSE`: what a hostile
/// relay can do (it cannot forge signatures, but it can send anything).
fn hostile_relay(events: Vec<String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let events = events.clone();
            std::thread::spawn(move || {
                let Ok(mut ws) = tungstenite::accept(stream) else {
                    return;
                };
                let deadline = Instant::now() + Duration::from_secs(30);
                while Instant::now() < deadline {
                    let Ok(msg) = ws.read() else { return };
                    let Ok(text) = msg.to_text() else { continue };
                    let Ok(serde_json::Value::Array(parts)) = serde_json::from_str(text) else {
                        continue;
                    };
                    if parts.first().and_then(|v| v.as_str()) != Some("REQ") {
                        continue;
                    }
                    let sub = parts[1].as_str().unwrap_or("").to_string();
                    for e in &events {
                        let _ = ws.send(format!(r#"["EVENT","{sub}",{e}]"#).into());
                    }
                    let _ = ws.send(format!(r#"["EOSE","{sub}"]"#).into());
                }
            });
        }
    });
    url
}

#[test]
fn a_hostile_relay_with_forged_or_replayed_events_installs_nothing() {
    let author = Author::new();
    let relay = BlobRelay::start(author.h(), &[]);
    let archive = author.build("0.1.0", None);
    let published = author.publish(&archive, &author.key(), &[&relay.url], &relay.blobs);
    assert_eq!(published.code, 0, "{}", published.stderr);
    let genuine = std::fs::read_to_string(format!("{}.sig.json", archive.display())).unwrap();
    let operator = tempfile::tempdir().unwrap();

    // Forged: the genuine event with its version changed (the signature no longer matches).
    let forged = genuine.trim().replace("\"0.1.0\"", "\"0.3.0\"");
    let url = hostile_relay(vec![forged]);
    let refused = install_by_id(operator.path(), &format!("{ID}@0.3.0"), &url, &[]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    let code = error_code(&refused);
    // nostr-sdk drops events whose signature fails before apiary sees them; either way nothing
    // for that version is found and nothing installs.
    assert!(
        ["signature.invalid", "registry.not-found"].contains(&code.as_str()),
        "{code}"
    );

    // Replayed: a genuine event, but for 0.1.0 when 0.2.0 is asked for; another pack's event.
    let url = hostile_relay(vec![genuine.trim().to_string()]);
    let refused = install_by_id(operator.path(), &format!("{ID}@0.2.0"), &url, &[]);
    assert_eq!(error_code(&refused), "registry.not-found");
    let refused = install_by_id(operator.path(), "com.example.other", &url, &[]);
    assert_eq!(error_code(&refused), "registry.not-found");
    let listed = run(operator.path(), &["list", "--json"]).json();
    assert_eq!(listed["packs"], serde_json::json!([]), "nothing installed");

    // The genuine event from the same hostile relay: it is only a messenger, and the signature
    // and the blob's digest are what count.
    let installed = install_by_id(operator.path(), ID, &url, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
}

#[test]
fn up_serves_blobs_on_its_embedded_relay_for_a_publish_and_an_install() {
    let author = Author::new();
    let blobs = author.h().join("up-blobs");
    let pack = author.pack();
    let mut up = crate::support::live::Up::start(
        author.h(),
        &[&pack],
        &["--blobs", blobs.to_str().unwrap()],
        &[],
    );
    let line = up.wait_for(|l| l.starts_with("blobs http://"));
    let blob_url = line.split_whitespace().nth(1).unwrap().to_string();
    let relay_url = up.url.clone();
    let archive = author.build("0.1.0", None);
    let published = author.publish(&archive, &author.key(), &[&relay_url], &blob_url);
    assert_eq!(published.code, 0, "{}", published.stderr);
    let operator = tempfile::tempdir().unwrap();
    let installed = install_by_id(operator.path(), ID, &relay_url, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    assert_eq!(installed.json()["author"], author.npub().as_str());
    up.stop_ok();
}

#[test]
fn a_signature_published_beside_an_archive_url_is_checked_too() {
    let author = Author::new();
    let archive = author.build("0.1.0", Some(&author.key()));
    let site = author.h().join("site");
    std::fs::create_dir_all(&site).unwrap();
    let name = archive.file_name().unwrap().to_str().unwrap().to_string();
    for suffix in ["", ".sha256", ".sig.json"] {
        let from = format!("{}{suffix}", archive.display());
        std::fs::copy(&from, site.join(format!("{name}{suffix}"))).unwrap();
    }
    let base = crate::support::dist::serve(&site);
    let url = format!("{base}/{name}");
    let sha256 = crate::support::dist::sha256_hex(&std::fs::read(&archive).unwrap());
    let operator = tempfile::tempdir().unwrap();
    let install = |what: &str| {
        run(
            operator.path(),
            &["install", "--sha256", &sha256, what, "--json"],
        )
    };

    let installed = install(&url);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    assert_eq!(installed.json()["author"], author.npub().as_str());

    // The server's signature swapped for a stranger's over the same archive.
    let stranger = tempfile::tempdir().unwrap();
    let made = run(stranger.path(), &["keys", "new", "--author", "--json"]);
    let key = made.json()["author_key"].as_str().unwrap().to_string();
    let copy = stranger.path().join(&name);
    std::fs::copy(&archive, &copy).unwrap();
    let signed = run(
        stranger.path(),
        &["pack", "sign", copy.to_str().unwrap(), "--sign-with", &key],
    );
    assert_eq!(signed.code, 0, "{}", signed.stderr);
    std::fs::copy(
        format!("{}.sig.json", copy.display()),
        site.join(format!("{name}.sig.json")),
    )
    .unwrap();
    assert_eq!(error_code(&install(&url)), "signature.author-changed");
}
