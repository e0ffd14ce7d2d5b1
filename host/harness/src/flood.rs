//! Flood control: how many turns a persona gives one author and one channel.
//!
//! Every turn costs a persona's agent real work, and anyone who can post to a channel can ask for
//! one: forty mentions, each the root of a thread of its own so that thread batching does not
//! merge them, were forty turns. So each persona has two token buckets ([`Bucket`]): one per
//! author, shared by the persona's channels, and one per channel. A turn takes a token from the
//! channel's bucket and from the bucket of every author whose messages it answers.
//!
//! A message whose author (or channel) has no token left waits in its worker's queue
//! ([`Waiting`]); when a token comes back, all that author's waiting messages are answered
//! together in one turn (coalesced, not dropped), and other authors are served meanwhile. Each
//! message held this way is reported once (`limited`, `action: coalesced`). Only the queue's own
//! bounds drop messages, each with a `limited` note (`action: dropped`): an author's waiting
//! messages beyond [`MAX_WAITING_PER_AUTHOR`] (their oldest go; a turn answers the newest), and
//! newcomers once [`MAX_WAITING`] messages wait in all.

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use nostr_sdk::prelude::PublicKey;

use super::Reason;
use crate::relay::Message;

/// The default turns per minute a persona gives one author (`apiary up --author-turns`).
pub const DEFAULT_AUTHOR_TURNS: u32 = 5;
/// The default turns per minute a persona takes in one channel (`apiary up --channel-turns`).
pub const DEFAULT_CHANNEL_TURNS: u32 = 30;
/// An author's messages waiting in one (persona, channel) queue beyond this drop their oldest.
/// The same as the most messages one turn answers.
pub const MAX_WAITING_PER_AUTHOR: usize = 20;
/// Messages waiting in one (persona, channel) queue beyond this are dropped as they arrive.
pub const MAX_WAITING: usize = 500;
/// Per-author buckets a persona remembers; beyond this, full ones (authors quiet for a while)
/// are forgotten.
const AUTHORS_CAP: usize = 4096;

/// A rate of turns: at most `tokens` at once, and `tokens` more every `per`; 0: no limit.
pub use apiary_limits::{Bucket, Rate};

/// `5 turns per 60 s`, as the `limited` notes say it.
pub fn turns(rate: Rate) -> String {
    format!("{} turns per {} s", rate.tokens, rate.per.as_secs())
}

/// The operator's limits for one `apiary up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnLimits {
    /// Per persona and author, over all the persona's channels.
    pub per_author: Rate,
    /// Per persona and channel.
    pub per_channel: Rate,
}

impl TurnLimits {
    pub const UNLIMITED: TurnLimits = TurnLimits {
        per_author: Rate::UNLIMITED,
        per_channel: Rate::UNLIMITED,
    };
}

impl Default for TurnLimits {
    fn default() -> TurnLimits {
        TurnLimits {
            per_author: Rate::per_minute(DEFAULT_AUTHOR_TURNS),
            per_channel: Rate::per_minute(DEFAULT_CHANNEL_TURNS),
        }
    }
}

/// One persona's per-author buckets (shared by its channels' workers).
#[derive(Debug)]
pub struct Authors {
    buckets: apiary_limits::Buckets<PublicKey>,
}

impl Authors {
    pub fn new(rate: Rate) -> Authors {
        Authors {
            buckets: apiary_limits::Buckets::new(rate, AUTHORS_CAP),
        }
    }

    pub fn rate(&self) -> Rate {
        self.buckets.rate()
    }

    /// When `author` may be answered again (now for an author with no bucket yet).
    pub fn ready_at(&mut self, author: &PublicKey, now: Instant) -> Instant {
        self.buckets.ready_at(author, now)
    }

    pub fn take(&mut self, author: &PublicKey, now: Instant) {
        if self.rate().is_limited() {
            self.buckets.get(*author, now).take(now);
        }
    }
}

/// A queued message and whether its `limited` note went out.
struct Entry {
    message: Message,
    reason: Reason,
    reported: bool,
}

/// Why a message was held or dropped, for the `limited` note.
#[derive(Debug, Clone)]
pub struct Limited {
    pub message: Message,
    /// `author` or `channel`: which limit.
    pub limit: &'static str,
    pub rate: Rate,
    /// `coalesced` (it waits for the next turn) or `dropped`.
    pub action: &'static str,
}

/// What a worker does next.
pub enum Next {
    /// Answer these (arrival order) in one turn.
    Turn(Vec<(Message, Reason)>),
    /// Nothing may run before this instant (or before another message arrives).
    WaitUntil(Instant),
    /// Nothing waits.
    Idle,
}

/// One (persona, channel) worker's waiting messages.
#[derive(Default)]
pub struct Waiting {
    queue: VecDeque<Entry>,
}

impl Waiting {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queues a message; returns the messages this drops (an author's oldest beyond
    /// [`MAX_WAITING_PER_AUTHOR`], or the newcomer when [`MAX_WAITING`] are waiting).
    pub fn push(&mut self, message: Message, reason: Reason, authors: Rate) -> Vec<Limited> {
        let dropped = |message: Message, limit| Limited {
            message,
            limit,
            rate: authors,
            action: "dropped",
        };
        if self.queue.len() >= MAX_WAITING {
            return vec![dropped(message, "queue")];
        }
        let author = message.author;
        self.queue.push_back(Entry {
            message,
            reason,
            reported: false,
        });
        let mut out = Vec::new();
        let mut count = self
            .queue
            .iter()
            .filter(|e| e.message.author == author)
            .count();
        while count > MAX_WAITING_PER_AUTHOR {
            let Some(at) = self.queue.iter().position(|e| e.message.author == author) else {
                break;
            };
            if let Some(e) = self.queue.remove(at) {
                out.push(dropped(e.message, "author"));
            }
            count -= 1;
        }
        out
    }

    /// Everything still waiting (the harness is stopping and will not wait for tokens).
    pub fn drain(&mut self) -> Vec<Message> {
        self.queue.drain(..).map(|e| e.message).collect()
    }

    /// The next turn under the limits, at `now`: led by the oldest message whose author has a
    /// token, with that author's other waiting messages and those of the same thread whose
    /// authors have tokens too (at most `max` in all). The tokens are taken. Messages that must
    /// wait are reported in `held` the first time.
    pub fn next(
        &mut self,
        now: Instant,
        channel: &mut Bucket,
        channel_rate: Rate,
        authors: &mut Authors,
        max: usize,
        held: &mut Vec<Limited>,
    ) -> Next {
        if self.queue.is_empty() {
            return Next::Idle;
        }
        let author_rate = authors.rate();
        let channel_at = channel.ready_at(now);
        if channel_at > now {
            for e in self.queue.iter_mut().filter(|e| !e.reported) {
                e.reported = true;
                held.push(Limited {
                    message: e.message.clone(),
                    limit: "channel",
                    rate: channel_rate,
                    action: "coalesced",
                });
            }
            return Next::WaitUntil(channel_at);
        }
        // Who may have a turn now; the earliest instant someone else may.
        let mut ready: HashSet<PublicKey> = HashSet::new();
        let mut earliest: Option<Instant> = None;
        for e in &self.queue {
            let at = authors.ready_at(&e.message.author, now);
            if at <= now {
                ready.insert(e.message.author);
            } else {
                earliest = Some(earliest.map_or(at, |x: Instant| x.min(at)));
            }
        }
        let Some(head) = self
            .queue
            .iter()
            .position(|e| ready.contains(&e.message.author))
        else {
            self.report_held(&ready, author_rate, held);
            return Next::WaitUntil(earliest.unwrap_or(now));
        };
        let lead = self.queue[head].message.author;
        let root = self.queue[head].message.root;
        let mut batch = Vec::new();
        let mut rest = VecDeque::with_capacity(self.queue.len());
        for e in std::mem::take(&mut self.queue) {
            let joins = batch.len() < max
                && (e.message.author == lead
                    || (e.message.root == root && ready.contains(&e.message.author)));
            if joins {
                batch.push(e);
            } else {
                rest.push_back(e);
            }
        }
        self.queue = rest;
        channel.take(now);
        let mut paid = HashSet::new();
        for e in &batch {
            if paid.insert(e.message.author) {
                authors.take(&e.message.author, now);
            }
        }
        // Those still waiting for their author's token are reported now, not at the next look.
        let ready_after: HashSet<PublicKey> = ready
            .into_iter()
            .filter(|a| authors.ready_at(a, now) <= now)
            .collect();
        self.report_held(&ready_after, author_rate, held);
        Next::Turn(batch.into_iter().map(|e| (e.message, e.reason)).collect())
    }

    fn report_held(&mut self, ready: &HashSet<PublicKey>, rate: Rate, held: &mut Vec<Limited>) {
        for e in self
            .queue
            .iter_mut()
            .filter(|e| !e.reported && !ready.contains(&e.message.author))
        {
            e.reported = true;
            held.push(Limited {
                message: e.message.clone(),
                limit: "author",
                rate,
                action: "coalesced",
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::*;

    fn msg(keys: &Keys, text: &str, root: Option<EventId>) -> Message {
        let tags = root
            .map(|r| vec![Tag::parse(["e", &r.to_hex(), "", "root"]).unwrap()])
            .unwrap_or_default();
        let ev = crate::relay::message(keys, "general", text, tags).unwrap();
        Message::parse(&ev).unwrap()
    }

    fn root(i: u8) -> Option<EventId> {
        Some(EventId::from_byte_array([i; 32]))
    }

    #[test]
    fn a_flood_of_fresh_threads_is_coalesced_and_others_still_served() {
        let t0 = Instant::now();
        let flooder = Keys::generate();
        let other = Keys::generate();
        let mut w = Waiting::default();
        let mut channel = Bucket::new(Rate::per_minute(30), t0);
        let mut authors = Authors::new(Rate::per_minute(3));
        let mut held = Vec::new();
        let mut turns = 0;
        for i in 0..40u8 {
            let dropped = w.push(
                msg(&flooder, &format!("@bee {i}"), root(i)),
                Reason::Mention,
                authors.rate(),
            );
            assert!(dropped.iter().all(|d| d.action == "dropped"));
            if let Next::Turn(_) = w.next(
                t0,
                &mut channel,
                Rate::per_minute(30),
                &mut authors,
                20,
                &mut held,
            ) {
                turns += 1;
            }
        }
        assert_eq!(turns, 3);
        assert!(!held.is_empty() && held.iter().all(|h| h.limit == "author"));
        // 40 - 3 answered, at most 20 kept waiting: the rest were dropped with notes.
        w.push(
            msg(&other, "@bee me too", None),
            Reason::Mention,
            authors.rate(),
        );
        let Next::Turn(batch) = w.next(
            t0,
            &mut channel,
            Rate::per_minute(30),
            &mut authors,
            20,
            &mut held,
        ) else {
            panic!("the other author waits behind the flood");
        };
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].0.author, other.public_key());
        let Next::WaitUntil(at) = w.next(
            t0,
            &mut channel,
            Rate::per_minute(30),
            &mut authors,
            20,
            &mut held,
        ) else {
            panic!("the flooder has no token");
        };
        let Next::Turn(batch) = w.next(
            at,
            &mut channel,
            Rate::per_minute(30),
            &mut authors,
            20,
            &mut held,
        ) else {
            panic!("a token came back");
        };
        assert_eq!(batch.len(), 20, "the waiting flood in one turn");
        assert!(w.is_empty());
    }

    #[test]
    fn the_channel_limit_holds_everyone_and_each_message_is_reported_once() {
        let t0 = Instant::now();
        let mut w = Waiting::default();
        let mut channel = Bucket::new(Rate::per_minute(1), t0);
        let mut authors = Authors::new(Rate::UNLIMITED);
        let mut held = Vec::new();
        let a = Keys::generate();
        let b = Keys::generate();
        w.push(msg(&a, "one", root(1)), Reason::Mention, authors.rate());
        assert!(matches!(
            w.next(
                t0,
                &mut channel,
                Rate::per_minute(1),
                &mut authors,
                20,
                &mut held
            ),
            Next::Turn(_)
        ));
        w.push(msg(&a, "two", root(2)), Reason::Mention, authors.rate());
        w.push(msg(&b, "three", root(3)), Reason::Mention, authors.rate());
        for _ in 0..3 {
            assert!(matches!(
                w.next(
                    t0,
                    &mut channel,
                    Rate::per_minute(1),
                    &mut authors,
                    20,
                    &mut held
                ),
                Next::WaitUntil(_)
            ));
        }
        assert_eq!(held.len(), 2);
        assert!(held.iter().all(|h| h.limit == "channel"));
    }

    #[test]
    fn the_queue_is_bounded_per_author_and_in_all() {
        let mut w = Waiting::default();
        let a = Keys::generate();
        let mut dropped = Vec::new();
        for i in 0..(MAX_WAITING_PER_AUTHOR + 5) {
            dropped.extend(w.push(
                msg(&a, &i.to_string(), None),
                Reason::Mention,
                Rate::UNLIMITED,
            ));
        }
        assert_eq!(dropped.len(), 5);
        assert_eq!(dropped[0].message.content, "0", "the oldest go first");
        for _ in 0..MAX_WAITING {
            let k = Keys::generate();
            dropped.extend(w.push(msg(&k, "x", None), Reason::Mention, Rate::UNLIMITED));
        }
        assert_eq!(w.queue.len(), MAX_WAITING);
        assert!(dropped.iter().any(|d| d.limit == "queue"));
    }
}
