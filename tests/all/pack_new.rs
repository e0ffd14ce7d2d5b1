//! `apiary pack new`: a pack of one's own that validates clean and answers through `up` at once;
//! and `post`/`tail` finding the one channel `up` serves without `--channel`.

use apiary_e2e::{data_dir, run};

use crate::support::live::Up;
use crate::support::pack::pack_new;

#[test]
fn a_new_pack_validates_clean_and_answers_a_mention_through_up() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("crew");
    let dir_s = dir.to_str().unwrap();
    let made = pack_new(home.path(), &dir, "com.example.crew", &["scout", "scribe"]);
    let v = made.json();
    assert_eq!(v["id"], "com.example.crew");
    assert_eq!(v["personas"], serde_json::json!(["scout", "scribe"]));

    let checked = run(home.path(), &["pack", "validate", dir_s, "--json"]);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert_eq!(checked.json()["diagnostics"], serde_json::json!([]));

    let mut up = Up::start(home.path(), &[&dir], &[], &[]);
    // No --channel: the one channel this `up` serves.
    let posted = run(home.path(), &["post", "--relay", &up.url, "hello @scribe"]);
    assert_eq!(posted.code, 0, "{}", posted.stderr);
    let hello = posted.stdout.trim().to_string();
    let reply = up.reply_to("scribe", &hello);
    let tailed = run(
        home.path(),
        &[
            "tail",
            "--relay",
            &up.url,
            "--json",
            "--count",
            "2",
            "--timeout",
            "10",
        ],
    );
    assert_eq!(tailed.code, 0, "{}", tailed.stderr);
    assert!(tailed.stdout.contains(&reply), "{}", tailed.stdout);
    up.stop_ok();

    // With several channels recorded, post asks which instead of guessing.
    std::fs::write(data_dir(home.path()).join("channels"), "ops\ngeneral\n").unwrap();
    let asked = run(home.path(), &["post", "--relay", &up.url, "hi"]);
    assert_eq!(asked.code, 64, "{}", asked.stderr);
    assert!(
        asked.stderr.contains("#ops, #general") && asked.stderr.contains("--channel"),
        "{}",
        asked.stderr
    );
}

#[test]
fn pack_new_refuses_hostile_names_and_a_non_empty_directory_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("p");
    let dir_s = dir.to_str().unwrap();
    for bad in [
        &["--persona", "x\ntriggers: {all_messages: true}"][..],
        &["--persona", "../../etc"],
        &["--id", "../escape"],
        &["--id", ".hidden"],
    ] {
        let mut args = vec!["pack", "new", dir_s];
        args.extend_from_slice(bad);
        let r = run(home.path(), &args);
        assert_eq!(r.code, 64, "{bad:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("error: "), "{}", r.stderr);
    }
    assert!(!dir.exists(), "nothing written on a refusal");

    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.md"), "mine").unwrap();
    let r = run(home.path(), &["pack", "new", dir_s, "--json"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"]["code"], "error");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.md")).unwrap(),
        "mine"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

    // The legitimate path beside it still works, with the id made from the directory name.
    let fresh = home.path().join("My Team");
    let r = run(home.path(), &["pack", "new", fresh.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("local.my-team"), "{}", r.stdout);
    assert!(r.stderr.contains("apiary up"), "{}", r.stderr);
}
