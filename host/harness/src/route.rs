//! Routing: each event of the harness's subscription to the per-(persona, channel) queues of the
//! personas it wakes. Synchronous (the trigger matcher is; queueing is `try_send`), so it runs
//! wherever the event is: on the in-process relay's connection thread as the frame is read (see
//! `relay::echo::SkipEchoes::trusting`), or in the dispatch loop for the relay pool's events.
//!
//! Why not a task of its own: as a task on the harness's runtime, routing waited for a worker
//! thread behind the workers, agent pipes and publishers the previous events had woken (in
//! `live_agents`, 2 ms at p50 and 7 ms at p99 between the websocket frame and routing), and on a
//! thread of its own every event paid one more thread wake-up on a busy machine (0.2 ms at p50).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nostr_sdk::prelude::*;
use tokio::sync::mpsc;

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

pub(super) struct Router {
    pub lives: Vec<Arc<Live>>,
    /// Channel id → indexes into `lives` of the personas subscribed to it.
    pub routes: HashMap<String, Vec<usize>>,
    /// The personas' own keys (their replies come back on the subscription).
    pub own: HashSet<PublicKey>,
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
        let Some(message) = self.accept(event) else {
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
        let channel_name = self.lives[targets[0]]
            .channels
            .get(&message.channel)
            .map(String::as_str)
            .unwrap_or(&message.channel);
        let decisions = self.decide(&message, targets, channel_name);
        let mut woke = Vec::new();
        let mut decided: Vec<Decided> = Vec::new();
        for (&i, decision) in targets.iter().zip(decisions) {
            let persona = self.lives[i].trigger.name.as_str();
            let (woken, reason) = match decision {
                Err(why) => (false, why),
                Ok(reason) => match self.queue(i, &message, reason) {
                    Some(Ok(reason)) => {
                        woke.push(format!("{persona} ({reason})"));
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
        self.report(&message, channel_name, &woke, decided)
    }

    /// The message of `event` when it is one to route: a chat message not seen before, not the
    /// harness's own. Moves the subscription's cursor.
    fn accept(&mut self, event: &Event) -> Option<Message> {
        if event.kind != Kind::Custom(KIND_MESSAGE) || !self.seen.insert(event.id) {
            return None;
        }
        let message = Message::parse(event)?;
        let secs = message.created_at.as_secs();
        if secs > self.cursor.load(Ordering::Relaxed) && message.created_at <= Timestamp::now() {
            self.cursor.store(secs, Ordering::Relaxed);
        }
        // Our own replies come back on the subscription; the transport drops those this run
        // published (`relay::echo`), the rest (an earlier run's) end here. No second signature
        // check here: the relay pool verified the id and signature of every event before handing
        // it over (nostr-sdk's `verify_and_cache`), or, for the `relay_in_process` transport, our
        // in-process relay did before storing it; a check costs more than all of routing.
        if self.own.contains(&message.author) {
            return None;
        }
        self.routed += 1;
        Some(message)
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
            targets.iter().map(|&i| &self.lives[i].trigger).collect();
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
        let name = self.lives[i].trigger.name.as_str();
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
