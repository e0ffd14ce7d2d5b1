//! Sharded replicas on loopback, as a StatefulSet would run them: one `apiary relay`, three
//! `apiary up --shard i/3` (30 personas over 20 channels, persona keys made with `keys new`,
//! exported as a Secret and mounted as one `--keys-dir`, a data dir each), messages posted
//! throughout. One replica is killed mid-run and started again; then the set goes from 3 to 4 shards as a rolling update does (the new replica
//! first, then each old one restarted with the new count, messages still arriving).
//!
//! Checked on the relay, as a user sees it: every message is answered by the persona it
//! mentions; through the kill and restart exactly once (the kept cursor replays what arrived while
//! the replica was down, the relay check skips what was answered); the personas each replica runs
//! are those the hash assigns, and re-sharding moves exactly the predicted ones. Duplicates during
//! the rolling update (two replicas briefly owning a persona) are counted and printed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nostr::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::k8s::provisioned_keys;
use crate::support::live::relays::{Kind as RelayKind, Options, TestRelay};
use crate::support::live::wire::Wire;
use crate::support::live::{Up, WAIT, event_of, persona, write_pack};

const PACK_ID: &str = "com.example.shards";
const PERSONAS: usize = 30;
const CHANNELS: usize = 20;

fn name(i: usize) -> String {
    format!("p{i:02}")
}

/// The two channels persona `i` answers in.
fn channels_of(i: usize) -> [String; 2] {
    [
        format!("c{:02}", i % CHANNELS),
        format!("c{:02}", (i + 7) % CHANNELS),
    ]
}

/// The owner of a persona among `count` shards, computed here independently of apiary: the
/// highest SHA-256 weight over (length-prefixed pack id, name, shard).
fn predicted(persona: &str, count: u32) -> u32 {
    let score = |shard: u32| {
        let mut h = Sha256::new();
        for part in [PACK_ID.as_bytes(), persona.as_bytes()] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
        h.update(shard.to_be_bytes());
        let d = h.finalize();
        u64::from_be_bytes(d[..8].try_into().unwrap())
    };
    (0..count).max_by_key(|&s| score(s)).unwrap()
}

/// The pack and the provisioned keys (`<keys>/<pack-id>/<persona>.key`, and the operator's):
/// made with `apiary keys new --pack`, exported with `keys export --format k8s-secret` and
/// mounted as the StatefulSet mounts the Secret.
fn setup(root: &Path) -> (PathBuf, PathBuf, Vec<Keys>) {
    let pack = root.join("pack");
    let files: Vec<(String, String)> = (0..PERSONAS)
        .map(|i| {
            let [a, b] = channels_of(i);
            let fm = format!("subscribe: [\"{a}\", \"{b}\"]\ntriggers:\n  mentions: true");
            (name(i), persona(&name(i), &fm, "Answer briefly."))
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    write_pack(&pack, PACK_ID, &refs, &[]);
    // Made ahead, exported as the Secret and mounted as a pod would see it.
    let keys_dir = provisioned_keys(root, &pack, &root.join("keys"));
    let keys: Vec<Keys> = (0..PERSONAS)
        .map(|i| {
            let path = keys_dir.join(PACK_ID).join(format!("{}.key", name(i)));
            Keys::parse(std::fs::read_to_string(path).unwrap().trim()).unwrap()
        })
        .collect();
    (pack, keys_dir, keys)
}

struct Cluster {
    root: PathBuf,
    pack: PathBuf,
    keys_dir: PathBuf,
    relay_url: String,
}

impl Cluster {
    /// Replica `index` of `count`, with its own home (its data dir and kept cursor survive a
    /// restart, like a pod's volume).
    fn start(&self, index: u32, count: u32) -> Up {
        let home = self.root.join(format!("replica-{index}"));
        std::fs::create_dir_all(&home).unwrap();
        let shard = format!("{index}/{count}");
        let keys = self.keys_dir.display().to_string();
        Up::start(
            &home,
            &[&self.pack],
            &[
                "--relay",
                &self.relay_url,
                "--shard",
                &shard,
                "--keys-dir",
                &keys,
                "--json",
                "--native-triggers",
                "--author-turns",
                "0",
                "--channel-turns",
                "0",
            ],
            &[],
        )
    }
}

/// The personas a replica runs, from its `persona_ready` lines.
fn owned(up: &Up) -> BTreeSet<String> {
    up.seen
        .iter()
        .filter(|l| event_of(l) == "persona_ready")
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["persona"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Posts messages `range`, each mentioning one persona in one of its channels, signed by a key of
/// its own (one author per message: no turn answers two). Returns (message id, persona index).
fn post_range(url: &str, range: std::ops::Range<usize>) -> Vec<(EventId, usize)> {
    let mut wire = Wire::connect(url);
    range
        .map(|k| {
            let p = k % PERSONAS;
            let channel = &channels_of(p)[k / PERSONAS % 2];
            let event = EventBuilder::new(Kind::Custom(9), format!("@{} question {k}", name(p)))
                .tag(Tag::custom(
                    TagKind::single_letter(Alphabet::H, false),
                    [channel],
                ))
                .sign_with_keys(&Keys::generate())
                .unwrap();
            let ok = wire.publish(&event).expect("the relay answered");
            assert!(ok.accepted, "message {k} refused: {}", ok.message);
            (event.id, p)
        })
        .collect()
}

/// Every reply on the relay: (persona index, message answered) → count.
fn replies(url: &str, keys: &[Keys]) -> HashMap<(usize, String), usize> {
    let mut wire = Wire::connect(url);
    let mut out = HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        let events = wire
            .req(json!({"kinds": [9], "authors": [k.public_key().to_hex()], "limit": 100000}))
            .expect("the relay answered");
        for e in events {
            for tag in e["tags"].as_array().unwrap() {
                if tag[0] == "e" {
                    *out.entry((i, tag[1].as_str().unwrap().to_string()))
                        .or_insert(0) += 1;
                }
            }
        }
    }
    out
}

/// Waits (bounded) until every message of `posted` has a reply from its persona.
fn wait_answered(
    url: &str,
    keys: &[Keys],
    posted: &[(EventId, usize)],
    ups: &mut [Up],
) -> HashMap<(usize, String), usize> {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = replies(url, keys);
        let missing: Vec<String> = posted
            .iter()
            .enumerate()
            .filter(|(_, (id, p))| !got.contains_key(&(*p, id.to_hex())))
            .map(|(k, (id, p))| format!("#{k} {} to {}", id.to_hex(), name(*p)))
            .collect();
        if missing.is_empty() {
            return got;
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> = ups
                .iter_mut()
                .map(|up| {
                    up.drain();
                    let lines: Vec<&String> = up
                        .seen
                        .iter()
                        .filter(|l| {
                            missing.iter().any(|m| {
                                l.contains(&m[m.find(' ').unwrap() + 1..m.find(" to").unwrap()])
                            })
                        })
                        .collect();
                    format!("{lines:#?}\n{}", up.stderr())
                })
                .collect();
            panic!(
                "{} of {} messages still unanswered: {missing:#?}\n{}",
                missing.len(),
                posted.len(),
                logs.join("\n----\n")
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The messages of `posted` answered more than once: (message, persona index).
fn duplicates(
    got: &HashMap<(usize, String), usize>,
    posted: &[(EventId, usize)],
) -> Vec<(EventId, usize)> {
    posted
        .iter()
        .filter(|(id, p)| got.get(&(*p, id.to_hex())).copied().unwrap_or(0) > 1)
        .cloned()
        .collect()
}

/// `answered_elsewhere` lines of a replica (the relay check at work).
fn skipped_as_answered(up: &mut Up) -> usize {
    up.drain();
    up.seen
        .iter()
        .filter(|l| event_of(l) == "answered_elsewhere")
        .count()
}

#[test]
fn shards_answer_every_message_once_through_a_kill_and_a_resharding() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let opts = Options {
        auth: false,
        args: &[
            "--key-rate",
            "100000",
            "--connection-rate",
            "100000",
            "--max-stored-events",
            "100000",
        ],
    };
    let relay = TestRelay::start(RelayKind::ApiaryRelay, &root, opts).unwrap();
    let relay_url = relay.external.as_ref().unwrap().url.clone();
    let (pack, keys_dir, keys) = setup(&root);
    let cluster = Cluster {
        root: root.clone(),
        pack,
        keys_dir,
        relay_url: relay_url.clone(),
    };
    let started = Instant::now();

    // Three replicas: each runs exactly the personas the hash gives it.
    let mut ups: Vec<Up> = (0..3).map(|i| cluster.start(i, 3)).collect();
    let mut three: BTreeMap<String, u32> = BTreeMap::new();
    for (i, up) in ups.iter().enumerate() {
        for p in owned(up) {
            assert!(
                three.insert(p, i as u32).is_none(),
                "a persona on two replicas"
            );
        }
    }
    let expected3: BTreeMap<String, u32> = (0..PERSONAS)
        .map(|i| (name(i), predicted(&name(i), 3)))
        .collect();
    assert_eq!(three, expected3, "personas per replica, 3 shards");

    // Phase 1: messages throughout; replica 1 killed (SIGKILL, no drain) part way and started
    // again while messages keep arriving.
    let mut posted = post_range(&relay_url, 0..400);
    ups[1].child.kill().unwrap();
    ups[1].child.wait().unwrap();
    posted.extend(post_range(&relay_url, 400..700));
    ups[1] = cluster.start(1, 3);
    posted.extend(post_range(&relay_url, 700..1000));
    let got = wait_answered(&relay_url, &keys, &posted, &mut ups);
    let skipped1: usize = ups.iter_mut().map(skipped_as_answered).sum();
    assert_eq!(
        duplicates(&got, &posted),
        vec![],
        "messages answered twice through kill and restart"
    );

    // Phase 2: 3 → 4 shards as a rolling update: the new replica 3 first, then 2, 1, 0
    // restarted (SIGTERM, drain) with the new count, while a poster keeps posting.
    let (tx, rx) = mpsc::channel();
    let url = relay_url.clone();
    let poster = std::thread::spawn(move || {
        let mut all = Vec::new();
        for chunk in 0..10 {
            let from = 1000 + chunk * 50;
            all.extend(post_range(&url, from..from + 50));
            if rx.try_recv().is_ok() {
                break;
            }
        }
        all
    });
    let mut four: BTreeMap<String, u32> = BTreeMap::new();
    let mut new_ups: Vec<Up> = Vec::new();
    let up3 = cluster.start(3, 4);
    for p in owned(&up3) {
        four.insert(p, 3);
    }
    new_ups.push(up3);
    for i in (0..3).rev() {
        let mut old = ups.pop().unwrap();
        assert_eq!(old.stop(), 0, "replica {i} stopped cleanly");
        let up = cluster.start(i, 4);
        for p in owned(&up) {
            assert!(four.insert(p, i).is_none(), "a persona on two replicas");
        }
        new_ups.push(up);
    }
    let _ = tx.send(());
    let late = poster.join().unwrap();
    let expected4: BTreeMap<String, u32> = (0..PERSONAS)
        .map(|i| (name(i), predicted(&name(i), 4)))
        .collect();
    assert_eq!(four, expected4, "personas per replica, 4 shards");
    let moved: BTreeSet<&String> = three
        .iter()
        .filter(|(p, s)| four[p.as_str()] != **s)
        .map(|(p, _)| p)
        .collect();
    // Only to the new shard: nothing else moves.
    assert!(moved.iter().all(|p| four[p.as_str()] == 3), "{moved:?}");
    let all: Vec<(EventId, usize)> = posted.iter().chain(&late).cloned().collect();
    let got = wait_answered(&relay_url, &keys, &all, &mut new_ups);
    let skipped2: usize = new_ups.iter_mut().map(skipped_as_answered).sum();
    assert_eq!(
        duplicates(&got, &posted),
        vec![],
        "phase 1 answers repeated later"
    );
    // The documented window: while the new replica and a persona's old owner both run, both can
    // pass the relay check for one message before either reply is there. Only a moved persona
    // has two owners; the others are answered exactly once.
    let dups = duplicates(&got, &late);
    for (id, p) in &dups {
        assert!(
            moved.contains(&name(*p)),
            "{} answered twice by unmoved {}",
            id,
            name(*p)
        );
    }
    let phase2_dups = dups.len();
    eprintln!(
        "shards: {} messages in {:.1?}; kill+restart: 0 duplicates, {skipped1} skipped as answered; \
         3→4 rolling: {} of {} personas moved (predicted), {phase2_dups} duplicates of {} messages, \
         {skipped2} skipped as answered",
        all.len(),
        started.elapsed(),
        moved.len(),
        PERSONAS,
        late.len()
    );
    for mut up in new_ups {
        up.stop();
    }
}

/// A key file as a Secret mount gives it: readable by its owner only.
fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn a_provisioned_key_store_never_generates_a_missing_key() {
    let tmp = tempfile::tempdir().unwrap();
    let (pack, keys_dir, _) = setup(tmp.path());
    // One persona's key is missing from the "Secret": that persona is refused, the others run.
    let missing = keys_dir.join(PACK_ID).join("p07.key");
    std::fs::remove_file(&missing).unwrap();
    // Another is readable by every user, a third a link to a key outside the store (issue 32,
    // finding 8): both refused, saying why.
    use std::os::unix::fs::PermissionsExt;
    let open = keys_dir.join(PACK_ID).join("p03.key");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let outside = tmp.path().join("elsewhere.key");
    write_private(&outside, &Keys::generate().secret_key().to_secret_hex());
    let linked = keys_dir.join(PACK_ID).join("p05.key");
    std::fs::remove_file(&linked).unwrap();
    std::os::unix::fs::symlink(&outside, &linked).unwrap();
    let keys = keys_dir.display().to_string();
    let mut up = Up::start(
        tmp.path(),
        &[&pack],
        &["--json", "--native-triggers", "--keys-dir", &keys],
        &[],
    );
    up.drain();
    let refused: Vec<&String> = up
        .seen
        .iter()
        .filter(|l| event_of(l) == "persona_refused")
        .collect();
    assert_eq!(refused.len(), 3, "{refused:?}");
    let of = |name: &str| {
        refused
            .iter()
            .find(|l| l.contains(&format!("\"persona\":\"{name}\"")))
            .unwrap_or_else(|| panic!("{name} not refused: {refused:?}"))
    };
    assert!(of("p07").contains("never generated"), "{}", of("p07"));
    assert!(of("p03").contains("mode 0644"), "{}", of("p03"));
    assert!(
        of("p05").contains("outside the key directory"),
        "{}",
        of("p05")
    );
    assert!(
        !missing.exists(),
        "a key was generated in the provisioned store"
    );
    up.stop_ok();
}
