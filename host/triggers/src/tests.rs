//! The decision order, and the fast paths checked against plain definitions: a keyword wakes
//! exactly when a plain substring search of the lower-cased text finds it (the signature
//! prefilter is an optimisation, not a rule), both one persona at a time and through the batch's
//! probes, and the batch wakes exactly the pairs that one decision per pair wakes.

use crate::{Matcher, Prepared, Reason, decide_batch};

/// Deterministic xorshift, so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

fn prepared(text: &str, mentions: &[&str]) -> Prepared {
    let mut p = Prepared::new();
    p.set(text, mentions.iter().copied());
    p
}

#[test]
fn keyword_decisions_equal_a_plain_substring_search() {
    // `@` and `` ` ``, `[` and `{`, `A` and `a` differ only in the case bit (0x20), which the
    // signature ignores and the search must not.
    let alphabet = [
        "a", "b", "e", "x", "é", "ß", "CVE", " ", "-", "Ü", "ab", "ba", "z", "@", "`", "[", "{",
        "A",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..3000 {
        let keyword: String = (0..1 + rng.next() % 4)
            .map(|_| rng.pick(&alphabet))
            .collect();
        // Some texts as long as the longest chat lines, where most signature bits are set.
        let len = if round % 10 == 0 { 400 } else { 40 };
        let text: String = (0..rng.next() % len).map(|_| rng.pick(&alphabet)).collect();
        let matcher = Matcher::new("p", false, [keyword.as_str()], false, ["general"]);
        let decided = matcher.decide("general", &prepared(&text, &[]));
        let expected = if text.to_lowercase().contains(&keyword.to_lowercase()) {
            Reason::Keyword(0)
        } else {
            Reason::NoMatch
        };
        assert_eq!(
            decided, expected,
            "round {round}: keyword {keyword:?} in {text:?}"
        );
    }
}

#[test]
fn one_byte_keywords_and_keywords_at_the_edges_match() {
    let m = Matcher::new("p", false, ["x", "deploy", "ß"], false, ["#ops"]);
    let decide = |text: &str| m.decide("ops", &prepared(text, &[]));
    assert_eq!(decide("x"), Reason::Keyword(0));
    assert_eq!(decide("DEPLOY"), Reason::Keyword(1));
    assert_eq!(decide("time to deploy"), Reason::Keyword(1));
    assert_eq!(decide("straße"), Reason::Keyword(2));
    assert_eq!(decide("nothing here"), Reason::NoMatch);
}

/// The batch path indexes personas by channel and name; its answer must be exactly the waking
/// pairs of `Matcher::decide`, in order, including repeated names, `#`/bare channel spellings,
/// mention lists plus `@name` in the text, and personas with mentions off.
#[test]
fn batch_decisions_equal_the_decision_for_every_pair() {
    let names = ["ann", "Bob", "bob", "cy", "Zoë"];
    let channels = ["ops", "#ops", "dev", "#dev", "misc", "x"];
    let words = [
        "deploy", "x", "", "ß", "Ops", "bob", "@bob", "@Ann", "hello", "@zoë", "@cy",
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for round in 0..5000 {
        let matchers: Vec<Matcher> = (0..1 + rng.next() % 6)
            .map(|_| {
                let keywords: Vec<&str> = (0..rng.next() % 7).map(|_| rng.pick(&words)).collect();
                let subscribe: Vec<&str> =
                    (0..rng.next() % 3).map(|_| rng.pick(&channels)).collect();
                Matcher::new(
                    rng.pick(&names),
                    !rng.next().is_multiple_of(3),
                    keywords,
                    rng.next().is_multiple_of(5),
                    subscribe,
                )
            })
            .collect();
        // Now and then a batch longer than the 255 messages a signature's stamps last.
        let count = if round % 500 == 0 {
            600
        } else {
            1 + rng.next() % 5
        };
        let messages: Vec<(String, String, Vec<String>)> = (0..count)
            .map(|_| {
                let text: Vec<&str> = (0..rng.next() % 5).map(|_| rng.pick(&words)).collect();
                let mentions: Vec<String> = (0..rng.next() % 3)
                    .map(|_| rng.pick(&names).to_string())
                    .collect();
                (rng.pick(&channels).to_string(), text.join(" "), mentions)
            })
            .collect();
        // The batch reuses one `Prepared` from message to message; the pairs below take a fresh
        // one for each, so anything left over from a previous message shows as a difference.
        let batch = decide_batch(
            &matchers,
            messages
                .iter()
                .map(|(c, t, m)| (c.as_str(), t.as_str(), m.iter().map(String::as_str))),
        );
        let mut pairs = Vec::new();
        for (mi, (channel, text, mentions)) in messages.iter().enumerate() {
            let mentions: Vec<&str> = mentions.iter().map(String::as_str).collect();
            let message = prepared(text, &mentions);
            for (pi, matcher) in matchers.iter().enumerate() {
                let reason = matcher.decide(channel, &message);
                if reason.wakes() {
                    pairs.push((mi as u32, pi as u32, reason));
                }
            }
        }
        assert_eq!(batch, pairs, "round {round}: {messages:?}");
    }
}

/// (message, persona, reason), as [`decide_batch`] gives them.
type Wake = (u32, u32, Reason);

/// The wakes of a batch whose personas have only keywords (one channel), with the plain definition:
/// the first keyword in configured order that the lower-cased text contains.
fn keyword_wakes(personas: &[Vec<&str>], texts: &[&str]) -> (Vec<Wake>, Vec<Wake>) {
    let matchers: Vec<Matcher> = personas
        .iter()
        .enumerate()
        .map(|(i, keywords)| {
            Matcher::new(
                &format!("p{i}"),
                false,
                keywords.iter().copied(),
                false,
                ["ops"],
            )
        })
        .collect();
    let batch = decide_batch(&matchers, texts.iter().map(|t| ("ops", *t, [].into_iter())));
    let mut plain = Vec::new();
    for (mi, text) in texts.iter().enumerate() {
        for (pi, keywords) in personas.iter().enumerate() {
            let lowered = text.to_lowercase();
            if let Some(k) = keywords
                .iter()
                .position(|k| !k.is_empty() && lowered.contains(&k.to_lowercase()))
            {
                plain.push((mi as u32, pi as u32, Reason::Keyword(k)));
            }
        }
    }
    (batch, plain)
}

/// The batch's keyword wakes: overlapping keywords, one the end of another, shared by many
/// personas, non-ASCII ones, in any case.
#[test]
fn batch_keyword_wakes_equal_a_plain_substring_search() {
    let alphabet = [
        "a", "b", "e", "x", "é", "ß", "CVE", " ", "-", "Ü", "ab", "ba", "z", "@", "`", "[", "{",
        "A", "\u{212a}", "k",
    ];
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for round in 0..400 {
        let keywords: Vec<String> = (0..1 + rng.next() % 12)
            .map(|_| (0..rng.next() % 5).map(|_| rng.pick(&alphabet)).collect())
            .collect();
        let personas: Vec<Vec<&str>> = (0..1 + rng.next() % 8)
            .map(|_| {
                (0..rng.next() % 4)
                    .map(|_| keywords[(rng.next() % keywords.len() as u64) as usize].as_str())
                    .collect()
            })
            .collect();
        let texts: Vec<String> = (0..1 + rng.next() % 8)
            .map(|_| {
                let len = if round % 10 == 0 { 400 } else { 30 };
                (0..rng.next() % len).map(|_| rng.pick(&alphabet)).collect()
            })
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (batch, plain) = keyword_wakes(&personas, &texts);
        assert_eq!(batch, plain, "round {round}: {personas:?} in {texts:?}");
    }
}

#[test]
fn batch_keywords_at_the_edges_overlapping_and_shared() {
    let personas = vec![
        vec!["hers", "he"],
        vec!["she"],
        vec![],
        vec!["", "his"],
        vec!["straße", "ÜBER"],
        vec!["she", "hers"],
        vec!["s"],
    ];
    let texts = [
        "ushers",
        "HIS",
        "ends with his",
        "Straße über alles",
        "STRASSE",
        "",
        "nothing",
        "S",
    ];
    let (batch, plain) = keyword_wakes(&personas, &texts);
    assert_eq!(batch, plain);
    let wakes = |mi: u32| -> Vec<(u32, Reason)> {
        batch
            .iter()
            .filter(|w| w.0 == mi)
            .map(|w| (w.1, w.2))
            .collect()
    };
    // "ushers" holds "she", "he" and "hers", which overlap; "hers" comes first in its list.
    assert_eq!(
        wakes(0),
        [
            (0, Reason::Keyword(0)),
            (1, Reason::Keyword(0)),
            (5, Reason::Keyword(0)),
            (6, Reason::Keyword(0))
        ]
    );
    // At the very end, in capitals; the empty keyword never matches.
    assert_eq!(wakes(1), [(3, Reason::Keyword(1)), (6, Reason::Keyword(0))]);
    assert_eq!(wakes(2), [(3, Reason::Keyword(1)), (6, Reason::Keyword(0))]);
    assert_eq!(wakes(3), [(4, Reason::Keyword(0)), (6, Reason::Keyword(0))]);
    assert_eq!(wakes(4), [(6, Reason::Keyword(0))]);
    assert_eq!(wakes(5), []);
    assert_eq!(wakes(6), []);
    assert_eq!(wakes(7), [(6, Reason::Keyword(0))]);
}

/// A batch with no keyword anywhere, or keywords only of personas that wake on every message,
/// still decides mentions and all_messages.
#[test]
fn a_batch_without_keywords_decides_the_rest() {
    let matchers = [
        Matcher::new("a", true, [], false, ["ops"]),
        Matcher::new("b", false, ["deploy"], true, ["ops"]),
    ];
    let batch = decide_batch(
        &matchers,
        [
            ("ops", "deploy @a", [].into_iter()),
            ("dev", "deploy", [].into_iter()),
        ],
    );
    assert_eq!(
        batch,
        [(0, 0, Reason::Mentioned), (0, 1, Reason::AllMessages)]
    );
}

fn decide(m: &Matcher, channel: &str, text: &str, mentions: &[&str]) -> Reason {
    m.decide(channel, &prepared(text, mentions))
}

/// All three triggers on: a mention names the wake, else all_messages, never the keyword.
#[test]
fn a_mention_comes_first_then_all_messages_then_keywords() {
    let m = Matcher::new("pip", true, ["deploy"], true, ["general"]);
    assert_eq!(decide(&m, "general", "@pip deploy", &[]), Reason::Mentioned);
    assert_eq!(decide(&m, "general", "deploy", &["pip"]), Reason::Mentioned);
    assert_eq!(
        decide(&m, "general", "deploy now", &[]),
        Reason::AllMessages
    );
    assert_eq!(decide(&m, "general", "hello", &[]), Reason::AllMessages);
    let keywords_only = Matcher::new("pip", true, ["deploy"], false, ["general"]);
    assert_eq!(
        decide(&keywords_only, "general", "deploy now", &[]),
        Reason::Keyword(0)
    );
    assert_eq!(
        decide(&keywords_only, "general", "hello", &[]),
        Reason::NoMatch
    );
}

#[test]
fn a_mention_wakes_in_any_channel_and_nothing_else_does() {
    let m = Matcher::new("pip", true, ["deploy"], true, ["#general"]);
    assert_eq!(decide(&m, "random", "hi @PIP", &[]), Reason::Mentioned);
    assert_eq!(decide(&m, "random", "hi", &["Pip"]), Reason::Mentioned);
    assert_eq!(decide(&m, "random", "deploy", &[]), Reason::NotSubscribed);
    // `#general` and `general` are one channel, on either side.
    assert_eq!(decide(&m, "general", "x", &[]), Reason::AllMessages);
    assert_eq!(decide(&m, "#general", "x", &[]), Reason::AllMessages);
    // mentions off: a mention is an ordinary message.
    let quiet = Matcher::new("pip", false, ["deploy"], false, ["general"]);
    assert_eq!(decide(&quiet, "general", "@pip", &["pip"]), Reason::NoMatch);
    assert_eq!(
        decide(&quiet, "random", "@pip", &["pip"]),
        Reason::NotSubscribed
    );
    assert_eq!(
        decide(&quiet, "general", "@pip deploy", &[]),
        Reason::Keyword(0)
    );
}

/// `@name` is the name characters (ASCII letters, digits, `_`, `-`) after an `@`.
#[test]
fn an_at_name_ends_at_the_first_character_a_name_cannot_hold() {
    let m = Matcher::new("pip", true, [], false, ["general"]);
    for mention in [
        "@pip",
        "@Pip, look",
        "(@pip)",
        "@pip.",
        "@pipé",
        "x@@pip",
        "@pip@",
    ] {
        assert_eq!(
            decide(&m, "general", mention, &[]),
            Reason::Mentioned,
            "{mention}"
        );
    }
    for not in [
        "@pipe",
        "@pip_2",
        "@pip-x",
        "pip",
        "@ pip",
        "pip@example.com",
        "@pi p",
    ] {
        assert_eq!(decide(&m, "general", not, &[]), Reason::NoMatch, "{not}");
    }
}

/// The first keyword in configured order names the wake, whatever comes first in the text; an
/// empty keyword never matches but keeps its place in the numbering.
#[test]
fn keywords_are_named_in_configured_order() {
    let m = Matcher::new("p", false, ["", "beta", "alpha"], false, ["general"]);
    assert_eq!(
        decide(&m, "general", "alpha then beta", &[]),
        Reason::Keyword(1)
    );
    assert_eq!(decide(&m, "general", "ALPHA", &[]), Reason::Keyword(2));
    assert_eq!(decide(&m, "general", "", &[]), Reason::NoMatch);
    assert_eq!(decide(&m, "general", "gamma", &[]), Reason::NoMatch);
}

#[test]
fn only_mentions_and_matches_wake() {
    assert!(Reason::Mentioned.wakes());
    assert!(Reason::Keyword(0).wakes());
    assert!(Reason::AllMessages.wakes());
    assert!(!Reason::NotSubscribed.wakes());
    assert!(!Reason::NoMatch.wakes());
}

#[test]
fn a_qualified_mention_wakes_only_the_persona_of_that_pack() {
    let first = Matcher::new("com.example.first/bee", true, [], false, ["general"]);
    let second = Matcher::new("com.example.Second/bee", true, [], false, ["general"]);
    let plain = Matcher::new("bee", true, [], false, ["general"]);
    let woke = |text: &str, mentions: &[&str]| {
        let m = prepared(text, mentions);
        [&first, &second, &plain].map(|p| p.decide("general", &m) == Reason::Mentioned)
    };
    // The bare name is everyone's of that name.
    assert_eq!(woke("hi @bee.", &[]), [true, true, true]);
    // Qualified, case-insensitively, at the end of a sentence or before punctuation.
    assert_eq!(
        woke("@com.example.first/bee, hi", &[]),
        [true, false, false]
    );
    assert_eq!(
        woke("ask @COM.EXAMPLE.SECOND/Bee.", &[]),
        [false, true, false]
    );
    // An explicit mention (a `p` tag, which apiary gives as the qualified name) is exact too.
    assert_eq!(
        woke("hello", &["com.example.first/bee"]),
        [true, false, false]
    );
    // Another pack's id, a missing name, a path: no wrong wake.
    assert_eq!(woke("@com.example.third/bee", &[]), [false, false, false]);
    assert_eq!(woke("@bee/ and @/bee", &[]), [true, true, true]);
    assert_eq!(woke("see a@b.c/d", &[]), [false, false, false]);
    // The batch decides the same, indexing both names.
    let matchers = [first, second, plain];
    let texts = [
        "@com.example.first/bee",
        "@bee",
        "@com.example.second/bee x",
    ];
    let batch = decide_batch(
        &matchers,
        texts.iter().map(|t| ("general", *t, std::iter::empty())),
    );
    let pairs: Vec<(u32, u32)> = batch.iter().map(|&(m, p, _)| (m, p)).collect();
    assert_eq!(pairs, [(0, 0), (1, 0), (1, 1), (1, 2), (2, 1)]);
}

/// A set kept from batch to batch decides each batch as a set made for it alone: nothing of one
/// batch (a message's buffers, its mentions) leaks into the next.
#[test]
fn a_persona_set_kept_between_batches_decides_each_as_a_new_one() {
    let make = || {
        vec![
            Matcher::new("ann", true, ["deploy", "ß"], false, ["#ops"]),
            Matcher::new("pack.a/bob", true, ["x"], false, ["ops", "dev"]),
            Matcher::new("cy", false, [], true, ["dev"]),
        ]
    };
    let batches: [&[(&str, &str)]; 3] = [
        &[("ops", "time to DEPLOY"), ("dev", "@bob x")],
        &[("dev", "quiet"), ("ops", "straße @ann")],
        &[("misc", "@pack.a/bob hi"), ("ops", "nothing")],
    ];
    let mut kept = crate::PersonaSet::new(make());
    assert_eq!(kept.len(), 3);
    for batch in batches {
        let messages = || batch.iter().map(|(c, t)| (*c, *t, std::iter::empty()));
        let fresh = decide_batch(&make(), messages());
        assert!(!fresh.is_empty(), "{batch:?}");
        assert_eq!(kept.decide(messages()), fresh, "{batch:?}");
    }
}
