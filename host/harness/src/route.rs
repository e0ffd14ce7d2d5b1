//! Routing: each event of the harness's subscription to the per-(persona, channel) queues of the
//! personas it wakes. Synchronous (the trigger matcher is; queueing is `try_send`), so it runs
//! wherever the event is: on the in-process relay's connection thread as the frame is read (see
//! `relay::echo::SkipEchoes::trusting`), or in the dispatch loop for the relay pool's events.
//!
//! Why not a task of its own: as a task on the harness's runtime, routing waited for a worker
//! thread behind the workers, agent pipes and publishers the previous events had woken (in
//! `live_agents`, 2 ms at p50 and 7 ms at p99 between the websocket frame and routing), and on a
//! thread of its own every event paid one more thread wake-up on a busy machine (0.2 ms at p50).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nostr_sdk::prelude::*;
use tokio::sync::mpsc;

use super::team::{Handoff, Member, Stop, Woke};
use super::{DispatchError, Live, Note, Out, Reason, Seen, TriggerMatcher, TriggerPersona, event};
use crate::relay::{self, KIND_MESSAGE, Message};

/// A (persona index, channel id) queue of messages to answer.
pub(super) type Queues = HashMap<(usize, String), mpsc::Sender<(Message, Reason)>>;

/// The router, shared by the connection thread and the dispatch loop; `None` once the harness
/// stops (events still arriving are not routed, and the queues are gone so the workers drain).
pub(super) type Shared = Arc<Mutex<Option<Router>>>;

/// Routes `event` if the harness still runs; whether it woke a persona. A panic while routing
/// (a bug, in the matcher or here) is reported as an `error` for that event and routing goes on:
/// on the relay connection's thread it would otherwise end the connection, and with it every
/// persona's input.
pub(super) fn route(shared: &Shared, event: &Event) -> bool {
    let mut guard = shared.lock().unwrap_or_else(|e| e.into_inner());
    let Some(router) = guard.as_mut() else {
        return false;
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| router.route(event))) {
        Ok(woke) => woke,
        Err(panic) => {
            let why = DispatchError::panicked("while routing", panic);
            let id = event.id.to_hex();
            tracing::error!(event = %id, "{why}");
            let text = format!("error {id}: {why}");
            let error = super::error::event(None, None, Some(id), &why, &[]);
            (router.out)(Note::new(error, text));
            false
        }
    }
}

/// What routing knows of a running persona: who it is to the trigger matcher, and the names of
/// its channels (the rest of the persona stays with its worker).
pub(super) struct Routed {
    pub trigger: TriggerPersona,
    /// Subscribed channels: id → name.
    pub channels: BTreeMap<String, String>,
}

impl Routed {
    pub fn of(live: &Live) -> Routed {
        Routed {
            trigger: live.trigger.clone(),
            channels: live.channels.clone(),
        }
    }
}

pub(super) struct Router {
    /// The personas, by the indexes `routes` and `queues` use.
    pub personas: Vec<Routed>,
    /// Channel id → indexes into `personas` of the personas subscribed to it.
    pub routes: HashMap<String, Vec<usize>>,
    /// The harness's personas (and other replicas'), by key: their messages wake others only as
    /// [`super::team`] allows.
    pub own: HashMap<PublicKey, Arc<Member>>,
    /// `--hop-limit` (see [`super::team`]).
    pub hop_limit: u32,
    /// Which personas recent messages woke (see [`super::team`]).
    pub woke: Woke,
    pub queues: Queues,
    pub matcher: Arc<dyn TriggerMatcher>,
    pub out: Out,
    /// The newest `created_at` (seconds) seen, for the subscription's `since` cursor.
    pub cursor: Arc<AtomicU64>,
    pub seen: Seen,
    /// Messages routed (not the harness's own, not duplicates).
    pub routed: u64,
    /// Channels a hot reload subscribed to, with when: their messages from before are not
    /// answered (the re-sent subscription reads a little back; see [`super::reload`]).
    pub fresh: HashMap<String, Timestamp>,
}

/// One persona's decision about a message, for the JSON stream: `woken` with the reason, or
/// `skipped` with why it stays asleep.
struct Decided<'a> {
    persona: &'a str,
    /// `woken` (queued) or `skipped`.
    woken: bool,
    reason: String,
}

impl Router {
    fn route(&mut self, event: &Event) -> bool {
        // Benchmark probe (`benches/live_agents.rs`): an event handed to the harness by the relay
        // client. Disabled callsites cost one branch.
        tracing::trace!(target: "apiary::probe", id = %event.id, "event received");
        let Some((message, handoff)) = self.accept(event) else {
            return false;
        };
        let Some(targets) = self.routes.get(&message.channel) else {
            return false;
        };
        if !self.fresh.is_empty()
            && self
                .fresh
                .get(&message.channel)
                .is_some_and(|from| message.created_at < *from)
        {
            return false;
        }
        let channel_name = self.personas[targets[0]]
            .channels
            .get(&message.channel)
            .map(String::as_str)
            .unwrap_or(&message.channel);
        let mut decisions = self.decide(&message, targets, channel_name);
        if let Some(handoff) = &handoff {
            self.hand_off(handoff, &message, targets, channel_name, &mut decisions);
        }
        let mut woke = Vec::new();
        let mut woken: Vec<PublicKey> = Vec::new();
        let mut decided: Vec<Decided> = Vec::new();
        for (&i, decision) in targets.iter().zip(decisions) {
            let persona = self.personas[i].trigger.name.as_str();
            let (woken, reason) = match decision {
                Err(why) => (false, why),
                Ok(reason) => match self.queue(i, &message, reason) {
                    Some(Ok(reason)) => {
                        woke.push(format!("{persona} ({reason})"));
                        woken.push(self.personas[i].trigger.pubkey);
                        (true, reason)
                    }
                    Some(Err(why)) => {
                        woke.push(format!("{persona} ({why})"));
                        (false, why)
                    }
                    None => continue,
                },
            };
            decided.push(Decided {
                persona,
                woken,
                reason,
            });
        }
        if handoff.is_some() && woken.is_empty() {
            // A persona's message that woke no one: its stops were reported, nothing else is.
            return false;
        }
        self.woke.record(message.id, woken);
        self.report(&message, channel_name, &woke, decided)
    }

    /// The message of `event` when it is one to route: a chat message not seen before, with the
    /// handoff rules when a persona of the harness wrote it. Moves the subscription's cursor.
    fn accept(&mut self, event: &Event) -> Option<(Message, Option<Handoff>)> {
        if event.kind != Kind::Custom(KIND_MESSAGE) || !self.seen.insert(event.id) {
            return None;
        }
        let mut message = Message::parse(event)?;
        let secs = message.created_at.as_secs();
        if secs > self.cursor.load(Ordering::Relaxed) && message.created_at <= Timestamp::now() {
            self.cursor.store(secs, Ordering::Relaxed);
        }
        // Our own replies come back on the subscription; the transport drops those this run
        // published (`relay::echo`), the rest (an earlier run's) end here. No second signature
        // check here: the relay pool verified the id and signature of every event before handing
        // it over (nostr-sdk's `verify_and_cache`), or, for the `relay_in_process` transport, our
        // in-process relay did before storing it; a check costs more than all of routing.
        if let Some(from) = self.own.get(&message.author) {
            let handoff = Handoff::of(Arc::clone(from), &message, self.hop_limit);
            // Only `@name` and keywords wake from a persona's message (see `team`).
            message.mentions.clear();
            return Some((message, Some(handoff)));
        }
        // Only a persona's own hop count is believed.
        message.hop = None;
        self.routed += 1;
        Some((message, None))
    }

    /// Applies the handoff rules to the triggers' decisions for a persona's message; each persona
    /// the rules keep asleep is told why (`handoff_stopped`).
    fn hand_off(
        &self,
        handoff: &Handoff,
        message: &Message,
        targets: &[usize],
        channel_name: &str,
        decisions: &mut [Result<Reason, String>],
    ) {
        for (&i, decision) in targets.iter().zip(decisions.iter_mut()) {
            if decision.is_err() {
                continue;
            }
            let Some(to) = self.own.get(&self.personas[i].trigger.pubkey) else {
                continue;
            };
            let answered = message
                .parent
                .is_some_and(|parent| self.woke.woke(&parent, &to.pubkey));
            let Err(stop) = handoff.check(to).and(match answered {
                true => Err(Stop::AlreadyWoken),
                false => Ok(()),
            }) else {
                continue;
            };
            let why = handoff.why(stop, to);
            let id = message.id.to_hex();
            let stopped = event::Event::HandoffStopped {
                persona: to.name.clone(),
                from: handoff.from.qualified(),
                channel: channel_name.to_string(),
                id: id.clone(),
                hop: handoff.hop,
                limit: handoff.limit,
                stop: stop.as_str().into(),
                reason: why.clone(),
            };
            // A persona's own words in its own reply, or a reply quoting whom the question
            // asked, are routine; the other stops are news.
            (self.out)(match stop {
                Stop::Itself | Stop::AlreadyWoken => Note::only_json(stopped),
                _ => Note::new(stopped, format!("handoff_stopped {} {id}: {why}", to.name)),
            });
            *decision = Err(why);
        }
    }

    /// The matcher's decision for each persona of `targets`: the wake reason, or why it stays
    /// asleep. A failed matcher wakes nobody; each persona it decided for is told why.
    fn decide(
        &self,
        message: &Message,
        targets: &[usize],
        channel_name: &str,
    ) -> Vec<Result<Reason, String>> {
        let personas: Vec<&TriggerPersona> =
            targets.iter().map(|&i| &self.personas[i].trigger).collect();
        let id = message.id.to_hex();
        match self.matcher.decide_all(message, &personas) {
            Ok(decisions) => decisions
                .into_iter()
                .map(|d| d.ok_or_else(|| "no trigger matched".to_string()))
                .collect(),
            Err(e) => {
                let why = format!("trigger failed: {e}");
                for p in &personas {
                    tracing::warn!(persona = %p.name, event = %id, "{why}");
                    (self.out)(Note::new(
                        event::Event::Error {
                            persona: Some(p.name.clone()),
                            channel: Some(channel_name.to_string()),
                            id: Some(id.clone()),
                            reason: why.clone(),
                            breaker_open: false,
                            data: None,
                            stderr: Vec::new(),
                        },
                        format!("error {} {id}: {why}", p.name),
                    ));
                }
                vec![Err(why); personas.len()]
            }
        }
    }

    /// Queues the message for persona `i`: `Ok(reason)` queued, `Err(why)` dropped, `None` when
    /// the persona has no worker for the channel.
    fn queue(&self, i: usize, message: &Message, reason: Reason) -> Option<Result<String, String>> {
        let tx = self.queues.get(&(i, message.channel.clone()))?;
        let name = self.personas[i].trigger.name.as_str();
        Some(match tx.try_send((message.clone(), reason.clone())) {
            Ok(()) => {
                tracing::trace!(target: "apiary::probe", persona = %name, id = %message.id, "message queued");
                Ok(reason.to_string())
            }
            Err(_) => {
                tracing::warn!(persona = %name, channel = %message.channel, "queue full; message dropped");
                Err("queue full: dropped".into())
            }
        })
    }

    /// The `message` note, then each persona's decision; whether any persona woke.
    fn report(
        &self,
        message: &Message,
        channel_name: &str,
        woke: &[String],
        decided: Vec<Decided>,
    ) -> bool {
        let id = message.id.to_hex();
        let author = message.author.to_hex();
        let text = format!(
            "event {id} #{channel_name} from {}: {}",
            relay::short(&author),
            if woke.is_empty() {
                "no persona woke".to_string()
            } else {
                format!("woke {}", woke.join(", "))
            }
        );
        (self.out)(Note::new(
            event::Event::Message {
                id: id.clone(),
                channel: channel_name.to_string(),
                channel_id: message.channel.clone(),
                author,
                thread: message.root.map(|root| root.to_hex()),
                woke: woke.to_vec(),
            },
            text,
        ));
        let woken = decided.iter().any(|d| d.woken);
        for d in decided {
            let (persona, channel, id) =
                (d.persona.to_string(), channel_name.to_string(), id.clone());
            let reason = d.reason;
            (self.out)(Note::only_json(match d.woken {
                true => event::Event::Woken {
                    persona,
                    channel,
                    id,
                    reason,
                },
                false => event::Event::Skipped {
                    persona,
                    channel,
                    id,
                    reason,
                },
            }));
        }
        woken
    }
}

#[cfg(test)]
mod tests {
    //! Routing without processes or sockets: signed events in, queued messages and notes out.

    use super::*;
    use crate::NativeTriggers;
    use crate::resolve::Triggers;
    use crate::trigger::TriggerError;

    const GENERAL: &str = "g-general";
    const OPS: &str = "g-ops";

    /// A router over two personas, `ada` (mentions, keyword `deploy`) on #general and #ops and
    /// `bob` (mentions only) on #general, with queues of `depth` each; the notes it writes.
    struct Rig {
        shared: Shared,
        notes: Arc<Mutex<Vec<Note>>>,
        queued: HashMap<(usize, String), mpsc::Receiver<(Message, Reason)>>,
        keys: Vec<Keys>,
    }

    fn persona(name: &str, keys: &Keys, keywords: &[&str], channels: &[&str]) -> Routed {
        Routed {
            trigger: TriggerPersona {
                name: name.into(),
                display_name: name.into(),
                qualified: String::new(),
                pubkey: keys.public_key(),
                triggers: Triggers {
                    mentions: true,
                    keywords: keywords.iter().map(|k| k.to_string()).collect(),
                    all_messages: false,
                },
            },
            channels: channels
                .iter()
                .map(|id| (id.to_string(), id.trim_start_matches("g-").to_string()))
                .collect(),
        }
    }

    fn rig(matcher: Arc<dyn TriggerMatcher>, depth: usize) -> Rig {
        let keys = vec![Keys::generate(), Keys::generate()];
        let personas = vec![
            persona("ada", &keys[0], &["deploy"], &[GENERAL, OPS]),
            persona("bob", &keys[1], &[], &[GENERAL]),
        ];
        let mut routes: HashMap<String, Vec<usize>> = HashMap::new();
        let (mut queues, mut queued) = (HashMap::new(), HashMap::new());
        for (i, p) in personas.iter().enumerate() {
            for channel in p.channels.keys() {
                routes.entry(channel.clone()).or_default().push(i);
                let (tx, rx) = mpsc::channel(depth);
                queues.insert((i, channel.clone()), tx);
                queued.insert((i, channel.clone()), rx);
            }
        }
        let notes: Arc<Mutex<Vec<Note>>> = Arc::default();
        let sink = Arc::clone(&notes);
        let own = personas
            .iter()
            .map(|p| {
                let member = Member {
                    pack: "p".into(),
                    name: p.trigger.name.clone(),
                    display_name: p.trigger.name.clone(),
                    description: String::new(),
                    channels: Vec::new(),
                    pubkey: p.trigger.pubkey,
                    woken_by: None,
                    local: true,
                };
                (p.trigger.pubkey, Arc::new(member))
            })
            .collect();
        let router = Router {
            own,
            hop_limit: 4,
            woke: Woke::default(),
            personas,
            routes,
            queues,
            matcher,
            out: Arc::new(move |n| sink.lock().unwrap().push(n)),
            cursor: Arc::default(),
            seen: Seen::default(),
            routed: 0,
            fresh: HashMap::new(),
        };
        Rig {
            shared: Arc::new(Mutex::new(Some(router))),
            notes,
            queued,
            keys,
        }
    }

    impl Rig {
        fn take(&mut self, persona: usize, channel: &str) -> Vec<(Message, Reason)> {
            let rx = self.queued.get_mut(&(persona, channel.into())).unwrap();
            std::iter::from_fn(|| rx.try_recv().ok()).collect()
        }

        fn kinds(&self) -> Vec<&'static str> {
            self.notes
                .lock()
                .unwrap()
                .iter()
                .map(|n| n.event.kind())
                .collect()
        }

        fn routed(&self) -> u64 {
            self.shared.lock().unwrap().as_ref().unwrap().routed
        }
    }

    fn said(channel: &str, text: &str) -> Event {
        relay::message(&Keys::generate(), channel, text, vec![]).unwrap()
    }

    #[test]
    fn a_mention_wakes_only_that_persona_and_each_decision_is_reported() {
        let mut r = rig(Arc::new(NativeTriggers), 8);
        assert!(route(&r.shared, &said(GENERAL, "@bob can you look?")));
        assert!(r.take(0, GENERAL).is_empty());
        let bob = r.take(1, GENERAL);
        assert_eq!(bob.len(), 1);
        assert_eq!(bob[0].1, Reason::Mention);
        assert_eq!(bob[0].0.content, "@bob can you look?");
        assert_eq!(r.kinds(), ["message", "skipped", "woken"]);
        let notes = r.notes.lock().unwrap();
        let event::Event::Message { channel, woke, .. } = &notes[0].event else {
            panic!("{:?}", notes[0].event)
        };
        assert_eq!(
            (channel.as_str(), woke.as_slice()),
            ("general", &["bob (mention)".to_string()][..])
        );
    }

    #[test]
    fn a_keyword_wakes_in_every_channel_the_persona_holds() {
        let mut r = rig(Arc::new(NativeTriggers), 8);
        assert!(route(&r.shared, &said(OPS, "deploy is red")));
        let ada = r.take(0, OPS);
        assert_eq!(ada[0].1, Reason::Keyword("deploy".into()));
        assert!(!route(&r.shared, &said(GENERAL, "nothing for anyone")));
        assert!(r.take(0, GENERAL).is_empty() && r.take(1, GENERAL).is_empty());
    }

    #[test]
    fn duplicates_own_replies_other_kinds_and_unrouted_channels_wake_nobody() {
        let mut r = rig(Arc::new(NativeTriggers), 8);
        let once = said(GENERAL, "@ada hi");
        assert!(route(&r.shared, &once));
        assert!(!route(&r.shared, &once), "a duplicate is routed once");
        let own = relay::message(&r.keys[1], GENERAL, "@bob from bob", vec![]).unwrap();
        assert!(
            !route(&r.shared, &own),
            "a persona's own message never wakes it"
        );
        assert!(r.kinds().contains(&"handoff_stopped"), "{:?}", r.kinds());
        assert!(!route(&r.shared, &said("g-elsewhere", "@ada hi")));
        let note = EventBuilder::text_note("@ada hi")
            .sign_with_keys(&Keys::generate())
            .unwrap();
        assert!(!route(&r.shared, &note), "not a chat message");
        assert_eq!(r.take(0, GENERAL).len(), 1);
        // Routed: the first message and the one on a channel no persona holds.
        assert_eq!(r.routed(), 2);
    }

    /// A persona's message hands work to another by `@name`, carrying its hop count; at the
    /// limit, or where the woken persona's rule does not admit the author, it wakes nobody and
    /// says why. Its `p` tag (a reply's, naming whom it answers) wakes nobody.
    #[test]
    fn a_persona_hands_work_over_until_the_hop_limit_or_the_rule_stops_it() {
        let mut r = rig(Arc::new(NativeTriggers), 8);
        let bob = r.keys[1].clone();
        let hop = |n: u32| vec![relay::hop_tag(n)];
        let handoff = relay::message(&bob, GENERAL, "@ada check this", hop(1)).unwrap();
        assert!(route(&r.shared, &handoff));
        let taken = r.take(0, GENERAL);
        assert_eq!(taken.len(), 1);
        assert_eq!(
            taken[0].0.hop,
            Some(1),
            "the hop count travels with the message"
        );
        let tagged = relay::message(
            &bob,
            GENERAL,
            "an answer",
            vec![Tag::public_key(r.keys[0].public_key())],
        )
        .unwrap();
        assert!(!route(&r.shared, &tagged), "a reply's p tag wakes nobody");

        let last = relay::message(&bob, GENERAL, "@ada again", hop(4)).unwrap();
        assert!(!route(&r.shared, &last));
        let notes = r.notes.lock().unwrap().clone();
        let stop = notes
            .iter()
            .find_map(|n| match &n.event {
                event::Event::HandoffStopped { stop, reason, .. } => {
                    Some((stop.clone(), reason.clone()))
                }
                _ => None,
            })
            .expect("a handoff_stopped note");
        assert_eq!(stop.0, "hop-limit", "{stop:?}");
        assert!(stop.1.contains("hop 4 of at most 4"), "{stop:?}");

        // Ada lets nobody wake her now.
        {
            let mut guard = r.shared.lock().unwrap();
            let router = guard.as_mut().unwrap();
            let ada = router.own.get(&r.keys[0].public_key()).unwrap();
            let mut closed = (**ada).clone();
            closed.woken_by = Some(Vec::new());
            router.own.insert(closed.pubkey, Arc::new(closed));
        }
        let refused = relay::message(&bob, GENERAL, "@ada once more", hop(1)).unwrap();
        assert!(!route(&r.shared, &refused));
        assert!(r.take(0, GENERAL).is_empty());
        // A person's message still wakes her, and a hop tag in it is not believed.
        let person = relay::message(&Keys::generate(), GENERAL, "@ada hi", hop(3)).unwrap();
        assert!(route(&r.shared, &person));
        assert_eq!(r.take(0, GENERAL)[0].0.hop, None);
    }

    #[test]
    fn a_full_queue_drops_the_message_and_says_so() {
        let mut r = rig(Arc::new(NativeTriggers), 1);
        assert!(route(&r.shared, &said(GENERAL, "@bob one")));
        assert!(!route(&r.shared, &said(GENERAL, "@bob two")));
        assert_eq!(r.take(1, GENERAL).len(), 1);
        let notes = r.notes.lock().unwrap();
        let dropped = notes.iter().find_map(|n| match &n.event {
            event::Event::Skipped {
                persona, reason, ..
            } if persona == "bob" => Some(reason.clone()),
            _ => None,
        });
        assert_eq!(dropped.as_deref(), Some("queue full: dropped"));
    }

    struct Failing;
    impl TriggerMatcher for Failing {
        fn decide(&self, _: &Message, _: &TriggerPersona) -> Option<Reason> {
            None
        }
        fn decide_all(
            &self,
            _: &Message,
            _: &[&TriggerPersona],
        ) -> Result<Vec<Option<Reason>>, TriggerError> {
            Err(TriggerError::Failed("component trapped".into()))
        }
        fn name(&self) -> &str {
            "failing"
        }
    }

    struct Panicking;
    impl TriggerMatcher for Panicking {
        fn decide(&self, _: &Message, _: &TriggerPersona) -> Option<Reason> {
            panic!("a bug in the matcher")
        }
        fn name(&self) -> &str {
            "panicking"
        }
    }

    #[test]
    fn a_failing_matcher_wakes_nobody_and_reports_each_persona() {
        let mut r = rig(Arc::new(Failing), 8);
        assert!(!route(&r.shared, &said(GENERAL, "@ada @bob")));
        assert!(r.take(0, GENERAL).is_empty() && r.take(1, GENERAL).is_empty());
        let notes = r.notes.lock().unwrap();
        let errors: Vec<_> = notes
            .iter()
            .filter_map(|n| match &n.event {
                event::Event::Error {
                    persona, reason, ..
                } => Some((persona.clone()?, reason.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors
                .iter()
                .all(|(_, why)| why.contains("component trapped"))
        );
    }

    #[test]
    fn a_panic_while_routing_is_an_error_and_routing_goes_on() {
        let r = rig(Arc::new(Panicking), 8);
        assert!(!route(&r.shared, &said(GENERAL, "@ada")));
        assert!(!route(&r.shared, &said(GENERAL, "@bob")));
        assert_eq!(r.kinds(), ["error", "error"]);
        // The router is still there, not poisoned out of use.
        assert!(r.shared.lock().unwrap().is_some());
    }

    #[test]
    fn a_stopped_router_routes_nothing() {
        let mut r = rig(Arc::new(NativeTriggers), 8);
        r.shared.lock().unwrap().take();
        assert!(!route(&r.shared, &said(GENERAL, "@bob")));
        assert!(r.take(1, GENERAL).is_empty());
        assert!(r.kinds().is_empty());
    }

    fn said_at(channel: &str, text: &str, at: Timestamp) -> Event {
        EventBuilder::new(Kind::Custom(KIND_MESSAGE), text)
            .tag(relay::channel_tag(channel))
            .custom_created_at(at)
            .sign_with_keys(&Keys::generate())
            .unwrap()
    }

    #[test]
    fn a_freshly_subscribed_channel_ignores_messages_from_before() {
        let mut r = rig(Arc::new(NativeTriggers), 8);
        let now = Timestamp::now();
        r.shared
            .lock()
            .unwrap()
            .as_mut()
            .unwrap()
            .fresh
            .insert(GENERAL.into(), now);
        assert!(!route(&r.shared, &said_at(GENERAL, "@bob old", now - 120)));
        assert!(route(&r.shared, &said_at(GENERAL, "@bob new", now)));
        let bob = r.take(1, GENERAL);
        assert_eq!(bob.len(), 1);
        assert_eq!(bob[0].0.content, "@bob new");
    }

    #[test]
    fn the_cursor_follows_the_newest_message_but_not_a_future_one() {
        let r = rig(Arc::new(NativeTriggers), 8);
        let cursor = Arc::clone(&r.shared.lock().unwrap().as_ref().unwrap().cursor);
        let now = Timestamp::now();
        route(&r.shared, &said_at(GENERAL, "a", now - 30));
        assert_eq!(cursor.load(Ordering::Relaxed), (now - 30).as_secs());
        route(&r.shared, &said_at(GENERAL, "b", now - 90));
        assert_eq!(
            cursor.load(Ordering::Relaxed),
            (now - 30).as_secs(),
            "never backwards"
        );
        route(&r.shared, &said_at(GENERAL, "c", now + 3600));
        assert_eq!(
            cursor.load(Ordering::Relaxed),
            (now - 30).as_secs(),
            "a future clock is not trusted"
        );
    }
}
