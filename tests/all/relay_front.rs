//! The embedded relay's front door under attack, through `apiary relay --require-auth` spoken to in
//! raw NIP-01: messages spelt so that a substring screen misses them (JSON whitespace, escapes),
//! `COUNT` with a NIP-50 `search` before authentication, events near 1 MiB, shapes the relay
//! library reads differently; and NIP-42 events of the wrong kind, for another relay, for another
//! connection's challenge or too old. Each time a member of the key store is still served.

use std::path::Path;
use std::time::Duration;

use apiary_e2e::data_dir;
use nostr::prelude::*;
use serde_json::{Value, json};

use crate::support::live::relays::{Kind as RelayKind, Options, TestRelay};
use crate::support::live::wire::{self, Wire};

/// `apiary relay --require-auth` with an operator key in its key store; the relay, its URL and
/// the operator's keys.
fn members_only(home: &Path) -> (TestRelay, String, Keys) {
    let operator = Keys::generate();
    let keys = data_dir(home).join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let file = keys.join("operator.key");
    std::fs::write(&file, operator.secret_key().to_secret_hex()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let relay = TestRelay::start(
        RelayKind::ApiaryRelay,
        home,
        Options {
            auth: true,
            ..Options::default()
        },
    )
    .expect("apiary relay");
    let url = relay.external.as_ref().unwrap().url.clone();
    (relay, url, operator)
}

/// The connection's challenge: sent on connect, else asked for with a `REQ` (as a relay that
/// challenges only on a refusal wants).
fn challenge(w: &mut Wire) -> String {
    let challenged = |m: &Value| m[0] == "AUTH";
    let m = match w.wait(Duration::from_secs(2), challenged) {
        Some(m) => m,
        None => {
            w.send(json!(["REQ", "ask", {"kinds": [9]}]));
            w.wait(Duration::from_secs(5), challenged)
                .expect("an AUTH challenge")
        }
    };
    m[1].as_str().unwrap().to_string()
}

/// The challenge a relay sends on connect, before the client says anything.
fn unasked_challenge(url: &str) -> Option<String> {
    let mut w = Wire::connect(url);
    let m = w.wait(Duration::from_secs(5), |m| m[0] == "AUTH")?;
    Some(m[1].as_str()?.to_string())
}

/// A kind `kind` event with `challenge` and `relay` tags, `age` seconds old, signed by `keys`.
fn auth_event(keys: &Keys, kind: u16, challenge: &str, relay: &str, age: u64) -> Event {
    EventBuilder::new(Kind::Custom(kind), "")
        .tags([
            Tag::parse(["challenge", challenge]).unwrap(),
            Tag::parse(["relay", relay]).unwrap(),
        ])
        .custom_created_at(Timestamp::now() - age)
        .sign_with_keys(keys)
        .unwrap()
}

/// Sends `text` and waits for the `OK` about `id`: (accepted, message).
fn ok_for(w: &mut Wire, text: String, id: &EventId) -> (bool, String) {
    assert!(w.send_text(text), "connection open");
    let id = id.to_hex();
    let ok = w
        .wait(Duration::from_secs(10), |m| {
            m[0] == "OK" && m[1] == id.as_str()
        })
        .unwrap_or_else(|| panic!("no OK for {id}: {:#?}", w.got));
    (
        ok[2] == true,
        ok[3].as_str().unwrap_or_default().to_string(),
    )
}

/// Sends `text` and waits for the answer about subscription `sub` (`EOSE`, `COUNT` or `CLOSED`).
fn answer_for(w: &mut Wire, text: &str, sub: &str) -> Value {
    assert!(w.send_text(text.to_string()), "connection open");
    w.wait(Duration::from_secs(10), |m| {
        m[1] == sub && ["EOSE", "COUNT", "CLOSED"].contains(&m[0].as_str().unwrap_or(""))
    })
    .unwrap_or_else(|| panic!("no answer for {sub}: {:#?}", w.got))
}

fn is_auth_required(m: &Value) -> bool {
    m[0] == "CLOSED" && m[2].as_str().unwrap_or("").starts_with("auth-required:")
}

#[test]
fn the_front_decides_on_the_parsed_message_not_its_spelling() {
    let home = tempfile::tempdir().unwrap();
    let (_relay, url, operator) = members_only(home.path());

    // The operator authenticates and posts something a stranger should not read.
    let mut member = Wire::connect(&url);
    let c = challenge(&mut member);
    let auth = auth_event(&operator, 22242, &c, &url, 0);
    assert_eq!(
        ok_for(&mut member, json!(["AUTH", auth]).to_string(), &auth.id),
        (true, String::new())
    );
    let secret = wire::message(&operator, "the launch code is 4271", &[&["h", "ops"]]);
    assert!(member.publish(&secret).unwrap().accepted);

    // A stranger's AUTH, spelt with whitespace or an escape, is still an AUTH: refused.
    let stranger = Keys::generate();
    let spaced = format!("[{}\"AUTH\" , {{}} ]", " \n".repeat(12));
    for spelling in [spaced.as_str(), "[\"\\u0041UTH\",{}]"] {
        let mut w = Wire::connect(&url);
        let c = challenge(&mut w);
        let ev = auth_event(&stranger, 22242, &c, &url, 0);
        let text = spelling.replace("{}", &serde_json::to_string(&ev).unwrap());
        let (ok, why) = ok_for(&mut w, text, &ev.id);
        assert!(!ok && why.starts_with("restricted:"), "{spelling}: {why}");
        let closed = answer_for(&mut w, r#"["REQ","r",{"kinds":[9]}]"#, "r");
        assert!(is_auth_required(&closed), "{spelling}: {closed}");
    }

    // COUNT, with or without a NIP-50 search, is for authenticated clients only.
    let mut w = Wire::connect(&url);
    for count in [
        r#"["COUNT","c1",{"kinds":[9],"search":"launch code is 4"}]"#,
        r#"[ "COUNT" ,"c2",{"kinds":[9]}]"#,
        r#"["REQ","c3",{"search":"launch"}]"#,
    ] {
        let sub = &count[count.find("\"c").unwrap() + 1..][..2];
        let answer = answer_for(&mut w, count, sub);
        assert!(is_auth_required(&answer), "{count}: {answer}");
    }
    assert!(
        !w.got.iter().any(|m| m[0] == "COUNT" || m[0] == "EVENT"),
        "{:#?}",
        w.got
    );

    // An event near 1 MiB is over the 64 KiB cap however it is spelt, even from a member.
    let big = wire::message(&operator, &"x".repeat(900 * 1024), &[&["h", "ops"]]);
    let padding = " ".repeat(20);
    let text = format!(
        "[{padding}\"EVENT\",{}]",
        serde_json::to_string(&big).unwrap()
    );
    let (ok, why) = ok_for(&mut member, text, &big.id);
    assert!(!ok && why.contains("limit of 65536 bytes"), "{why}");

    // Shapes the relay library would read its own way are refused, not passed on.
    let extra = format!(
        "[\"EVENT\",{},\"and more\"]",
        serde_json::to_string(&secret).unwrap()
    );
    let (ok, why) = ok_for(&mut member, extra, &secret.id);
    assert!(!ok && why.starts_with("invalid:"), "{why}");
    assert!(member.send_text(r#"["NEG-OPEN","n",{},"6100"]"#.to_string()));
    let notice = member
        .wait(Duration::from_secs(5), |m| m[0] == "NOTICE")
        .expect("a NOTICE");
    assert!(
        notice[1].as_str().unwrap().starts_with("unsupported:"),
        "{notice}"
    );

    // The member is still answered: its COUNT, its search, its history.
    let count = answer_for(&mut member, r#"["COUNT","m1",{"kinds":[9]}]"#, "m1");
    assert_eq!(count[2]["count"], 1, "{count}");
    let found = member.req(json!({"search": "launch code"})).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["id"], secret.id.to_hex());
    let none = member.req(json!({"ids": [big.id.to_hex()]})).unwrap();
    assert!(none.is_empty(), "the oversized event was stored");
}

#[test]
fn nip42_takes_only_a_fresh_22242_for_this_relay_and_this_connection() {
    let home = tempfile::tempdir().unwrap();
    let (_relay, url, operator) = members_only(home.path());
    let port = url.rsplit(':').next().unwrap().to_string();
    let mut w = Wire::connect(&url);
    let c = challenge(&mut w);
    let mut other = Wire::connect(&url);
    let others = challenge(&mut other);
    assert_ne!(c, others, "each connection has its own challenge");

    let twenty_minutes = 20 * 60;
    let cases = [
        (auth_event(&operator, 1, &c, &url, 0), "kind 22242"),
        (auth_event(&operator, 22241, &c, &url, 0), "kind 22242"),
        (
            auth_event(&operator, 22242, &c, "wss://relay.example.com", 0),
            "another relay",
        ),
        (
            auth_event(&operator, 22242, &c, "ws://127.0.0.1:1", 0),
            "another relay",
        ),
        (auth_event(&operator, 22242, &others, &url, 0), "challenge"),
        (
            auth_event(&operator, 22242, &c, &url, twenty_minutes),
            "created_at",
        ),
    ];
    for (ev, why) in cases {
        let (ok, message) = ok_for(&mut w, json!(["AUTH", ev]).to_string(), &ev.id);
        assert!(!ok && message.contains(why), "{why}: {message}");
        // Still not authenticated.
        let closed = answer_for(&mut w, r#"["REQ","q",{"kinds":[9]}]"#, "q");
        assert!(is_auth_required(&closed), "after {why}: {closed}");
    }

    // Clients such as nostr-tools answer the first challenge only: it comes on connect.
    assert!(unasked_challenge(&url).is_some(), "no challenge on connect");

    // The right one, with the URL spelt another way (case, localhost, trailing slash), is taken.
    let spelt = format!("WS://LocalHost:{port}/");
    let good = auth_event(&operator, 22242, &c, &spelt, 60);
    assert_eq!(
        ok_for(&mut w, json!(["AUTH", good]).to_string(), &good.id),
        (true, String::new())
    );
    assert!(w.req(json!({"kinds": [9]})).is_ok());
    let post = wire::message(&operator, "authenticated", &[&["h", "general"]]);
    assert!(w.publish(&post).unwrap().accepted);
    // The same event on the other connection is for this one's challenge: refused there.
    let (ok, message) = ok_for(&mut other, json!(["AUTH", good]).to_string(), &good.id);
    assert!(!ok && message.contains("challenge"), "{message}");
}
