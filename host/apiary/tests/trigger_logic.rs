//! The trigger-default logic compiled natively: its keyword prefilter must never hide a match that a
//! plain substring search finds (it is an optimisation, not a rule).

#[path = "../../../guests/trigger-default/src/logic.rs"]
#[allow(dead_code)]
mod logic;

use logic::{Matcher, Prepared, Reason};

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
        let batch = logic::decide_batch(
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
