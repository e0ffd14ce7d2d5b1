//! One worker per (persona, channel): takes the routed messages into its flood-limited queue,
//! runs one turn at a time (`on_message`, prompt, supervision), and hands replies to its
//! publisher, which signs and publishes them in order.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures_util::FutureExt;
use tokio::sync::mpsc;

use super::event::Event;
use super::live::Live;
use super::supervise::Supervised;
use super::{
    DispatchError, Harness, MAX_BATCH, Note, QUEUE_CAP, Reason, cluster, flood, lock,
    persona_relay, prompt, thread_context,
};
use crate::acp::{AcpError, Turn};
use crate::relay::{self, Message, ReplyMode};

/// Works through one (persona, channel) queue until routing stops and the queue is empty.
pub(super) async fn worker(
    h: Harness,
    live: Arc<Live>,
    channel: String,
    rx: mpsc::Receiver<(Message, Reason)>,
) {
    let Some(channel_name) = live.channels.get(&channel).cloned() else {
        return;
    };
    let (publish_tx, publish_rx) = mpsc::channel(QUEUE_CAP);
    let publisher = tokio::spawn(
        Publisher {
            h: h.clone(),
            live: Arc::clone(&live),
            channel_name: channel_name.clone(),
        }
        .run(publish_rx),
    );
    let limits = live.turns;
    let turns = Turns {
        h,
        live,
        channel,
        channel_name,
        publish_tx,
    };
    let mut inbox = Inbox {
        rx,
        waiting: flood::Waiting::default(),
        bucket: flood::Bucket::new(limits.per_channel, Instant::now()),
        open: true,
    };
    loop {
        inbox.take_ready(&turns);
        match inbox.next(&turns) {
            flood::Next::Turn(batch) => inbox.turn(&turns, batch).await,
            // Stopping: nothing more arrives, and the harness does not wait for tokens.
            flood::Next::WaitUntil(_) if !inbox.open => inbox.drop_waiting(&turns),
            flood::Next::WaitUntil(at) => {
                tokio::select! {
                    got = inbox.rx.recv() => inbox.got(&turns, got),
                    _ = tokio::time::sleep_until(at.into()) => {}
                }
            }
            flood::Next::Idle if !inbox.open => break,
            flood::Next::Idle => {
                let got = inbox.rx.recv().await;
                inbox.got(&turns, got);
            }
        }
    }
    // Draining covers the replies still being published.
    drop(turns);
    let _ = publisher.await;
}

/// A worker's input: the routed messages, those taken and waiting for their turn, and this
/// channel's turn bucket.
struct Inbox {
    rx: mpsc::Receiver<(Message, Reason)>,
    waiting: flood::Waiting,
    bucket: flood::Bucket,
    /// Routing still runs (the sender is alive).
    open: bool,
}

impl Inbox {
    /// Takes what was routed so far without waiting.
    fn take_ready(&mut self, turns: &Turns) {
        while self.open {
            match self.rx.try_recv() {
                Ok((m, r)) => turns.admit(&mut self.waiting, m, r),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => self.open = false,
            }
        }
    }

    /// One message received (`None`: routing stopped).
    fn got(&mut self, turns: &Turns, got: Option<(Message, Reason)>) {
        match got {
            Some((m, r)) => turns.admit(&mut self.waiting, m, r),
            None => self.open = false,
        }
    }

    /// What the flood limits allow now, reporting the messages they hold back.
    fn next(&mut self, turns: &Turns) -> flood::Next {
        let limits = turns.live.turns;
        let mut held = Vec::new();
        let next = {
            let mut authors = turns.live.authors.lock().unwrap_or_else(|e| e.into_inner());
            self.waiting.next(
                Instant::now(),
                &mut self.bucket,
                limits.per_channel,
                &mut authors,
                MAX_BATCH,
                &mut held,
            )
        };
        for h in held {
            turns.limited(h, "it waits and is answered with their next turn");
        }
        next
    }

    /// Runs one turn. The queue is read during the turn too, so a long turn never fills it and
    /// the limits see every message; a panic ends this turn only.
    async fn turn(&mut self, turns: &Turns, batch: Vec<(Message, Reason)>) {
        let turn = AssertUnwindSafe(turns.turn(batch)).catch_unwind();
        tokio::pin!(turn);
        let ended = loop {
            tokio::select! {
                biased;
                ended = &mut turn => break ended,
                got = self.rx.recv(), if self.open => self.got(turns, got),
            }
        };
        if let Err(panic) = ended {
            turns
                .panicked(DispatchError::panicked("during the turn", panic))
                .await;
        }
    }

    /// Stopping: the messages still waiting for a turn are dropped, each reported.
    fn drop_waiting(&mut self, turns: &Turns) {
        let rate = turns.live.turns.per_author;
        for m in self.waiting.drain() {
            turns.limited(
                flood::Limited {
                    message: m,
                    limit: "stopping",
                    rate,
                    action: "dropped",
                },
                "dropped: the harness is stopping and the message was waiting for a turn",
            );
        }
    }
}

/// What one (persona, channel) worker needs for its turns.
struct Turns {
    h: Harness,
    live: Arc<Live>,
    channel: String,
    channel_name: String,
    publish_tx: mpsc::Sender<Reply>,
}

/// The parts of one prompt that do not change when the turn is retried on a fresh agent.
struct Ask<'a> {
    ctx: prompt::Context<'a>,
    reason: String,
    thread: Vec<Message>,
    earlier: Vec<(Message, String)>,
    message: &'a Message,
    id: &'a str,
}

impl Turns {
    /// This worker's persona and channel, for its events.
    fn who(&self) -> (String, String) {
        (self.live.trigger.name.clone(), self.channel_name.clone())
    }

    /// A `turn` that ended without publishing a reply, and why.
    fn unpublished(&self, id: &str, bytes: Option<usize>, reason: String, text: String) {
        let (persona, channel) = self.who();
        let turn = Event::Turn {
            persona,
            channel,
            id: id.to_string(),
            published: false,
            bytes,
            reason,
        };
        self.out(Note::new(turn, text));
    }

    /// An `error` of this worker (about message `id`, if one), with what the agent said.
    fn error(
        &self,
        id: Option<String>,
        text: String,
        why: &DispatchError,
        stderr: &[String],
    ) -> Note {
        let (persona, channel) = self.who();
        let event = super::error::event(Some(persona), Some(channel), id, why, stderr);
        super::error::explained(event, text, stderr)
    }

    fn out(&self, note: Note) {
        (self.h.out)(note)
    }

    /// Takes a routed message into the waiting queue, reporting any the queue's bounds drop.
    fn admit(&self, waiting: &mut flood::Waiting, message: Message, reason: Reason) {
        for dropped in waiting.push(message, reason, self.live.turns.per_author) {
            let why = match dropped.limit {
                "queue" => format!("dropped: {} messages already wait", flood::MAX_WAITING),
                _ => format!(
                    "dropped: more than {} messages of author {} wait (the oldest go)",
                    flood::MAX_WAITING_PER_AUTHOR,
                    relay::short(&dropped.message.author.to_hex())
                ),
            };
            self.limited(dropped, &why);
        }
    }

    /// Reports a message held back or dropped by the flood limits (`limited`).
    fn limited(&self, l: flood::Limited, what: &str) {
        let name = &self.live.trigger.name;
        let id = l.message.id.to_hex();
        let author = l.message.author.to_hex();
        // A held message says which rate it is over; a dropped one says why in `what`.
        let over = match (l.action, l.limit) {
            ("coalesced", "author") => format!(
                "author {} is over {name}'s {}",
                relay::short(&author),
                flood::turns(l.rate)
            ),
            ("coalesced", "channel") => {
                format!(
                    "#{} is over {name}'s {}",
                    self.channel_name,
                    flood::turns(l.rate)
                )
            }
            _ => String::new(),
        };
        let text = if over.is_empty() {
            format!("limited {name} {id}: {what}")
        } else {
            format!("limited {name} {id}: {over}; {what}")
        };
        tracing::info!(persona = %name, event = %id, "{text}");
        let (persona, channel) = self.who();
        let held = !over.is_empty();
        self.out(Note::new(
            Event::Limited {
                persona,
                channel: Some(channel),
                channel_id: None,
                id: Some(id),
                author: Some(author),
                limit: l.limit.into(),
                action: l.action.into(),
                allowed: None,
                used: None,
                turns: held.then_some(l.rate.tokens),
                per_secs: held.then_some(l.rate.per.as_secs()),
                count: None,
            },
            text,
        ));
    }

    /// After a panic in a turn: report it, and restart the agent (its state is unknown), which
    /// the circuit breaker counts like a crash.
    async fn panicked(&self, why: DispatchError) {
        let name = &self.live.trigger.name;
        tracing::error!(persona = %name, channel = %self.channel, "{why}");
        self.out(self.error(None, format!("error {name}: {why}"), &why, &[]));
        let generation = self.live.current().await.generation();
        if let Err(e) = self.live.restart(generation, &self.h.out).await {
            self.out(self.error(None, format!("error {name}: {e}"), &e, &[]));
        }
    }

    /// One turn: `on_message` for each message of the batch, the prompt (answering the newest,
    /// the others with it), supervision, then the reply handed to the publisher.
    async fn turn(&self, batch: Vec<(Message, Reason)>) {
        let name = &self.live.trigger.name;
        // Benchmark probe (`benches/live_agents.rs`): the worker has the message.
        if let Some((first, _)) = batch.first() {
            tracing::trace!(target: "apiary::probe", persona = %name, id = %first.id, "message taken");
        }
        let mut kept = self.screen(batch).await;
        // Another replica (or this one before a restart) may have answered some already.
        if self.h.config.cluster.check_replies {
            let mut unanswered = Vec::with_capacity(kept.len());
            for (m, r) in kept {
                if !answered_elsewhere(&self.h, &self.live, &self.channel_name, &m, "turn").await {
                    unanswered.push((m, r));
                }
            }
            kept = unanswered;
        }
        // The turn answers the newest message; the earlier ones of the burst come with it.
        let Some((message, reason)) = kept.pop() else {
            return;
        };
        if self.over_budget(&message, &kept) {
            return;
        }
        let earlier: Vec<(Message, String)> =
            kept.into_iter().map(|(m, r)| (m, r.to_string())).collect();
        let id = message.id.to_hex();
        if !earlier.is_empty() {
            let ids: Vec<String> = earlier.iter().map(|(m, _)| m.id.to_hex()).collect();
            let text = format!("batch {name} {id}: with {}", ids.join(","));
            let (persona, channel) = self.who();
            self.out(Note::new(
                Event::Batch {
                    persona,
                    channel,
                    id: id.clone(),
                    with: ids,
                },
                text,
            ));
        }
        let client = persona_relay(&self.live, &self.h).await;
        let thread = match message.root {
            Some(root) => thread_context(&client, &message, root).await,
            None => Vec::new(),
        };
        let ask = Ask {
            ctx: prompt::Context {
                channel_name: &self.channel_name,
                persona: name,
                publish: self.h.config.publish,
            },
            reason: reason.to_string(),
            thread,
            earlier,
            message: &message,
            id: &id,
        };
        // Its tools read the thread of, and count hops from, the message being answered.
        self.live.answering(&self.channel, Some(&message));
        let turn = self.prompt(&ask).await;
        self.live.answering(&self.channel, None);
        tracing::trace!(target: "apiary::probe", persona = %name, channel = %self.channel, "turn ended");
        match turn {
            Ok(turn) => {
                if let Some(tokens) = turn.tokens {
                    lock(&self.live.budget).spent(Instant::now(), tokens);
                    self.report_budget();
                }
                self.deliver(&ask, turn).await
            }
            Err(e) => {
                tracing::error!(persona = %name, event = %id, "turn failed: {e}");
                let stderr = self.live.stderr().lines();
                let text = format!("error {name} {id}: {e}");
                self.out(self.error(Some(id.clone()), text, &e, &stderr));
            }
        }
    }

    /// Takes a turn from the persona's budget; when it is over a limit, the turn's messages are
    /// dropped, each with a `limited` note naming the limit.
    fn over_budget(&self, message: &Message, earlier: &[(Message, Reason)]) -> bool {
        let Err(over) = lock(&self.live.budget).take(Instant::now()) else {
            self.report_budget();
            return false;
        };
        let name = &self.live.trigger.name;
        for m in earlier.iter().map(|(m, _)| m).chain([message]) {
            let id = m.id.to_hex();
            let text = format!(
                "limited {name} {id}: {name} is over its {}: {over}; dropped",
                over.limit
            );
            tracing::warn!(persona = %name, event = %id, "{text}");
            let (persona, channel) = self.who();
            self.out(Note::new(
                Event::Limited {
                    persona,
                    channel: Some(channel),
                    channel_id: None,
                    id: Some(id),
                    author: Some(m.author.to_hex()),
                    limit: over.limit.into(),
                    action: "dropped".into(),
                    allowed: Some(over.allowed),
                    used: Some(over.used),
                    turns: None,
                    per_secs: None,
                    count: None,
                },
                text,
            ));
        }
        true
    }

    /// `budget` (JSON only, for the status view): the persona's spending limit closest to
    /// tripping, when it has any.
    fn report_budget(&self) {
        let Some(t) = lock(&self.live.budget).tightest(Instant::now()) else {
            return;
        };
        let (persona, channel) = self.who();
        self.out(Note::only_json(Event::Budget {
            persona,
            channel,
            limit: t.limit.into(),
            used: t.used,
            allowed: t.allowed,
        }));
    }

    /// The batch's messages this persona has not answered and its `on_message` hook keeps.
    async fn screen(&self, batch: Vec<(Message, Reason)>) -> Vec<(Message, Reason)> {
        let live = &self.live;
        let name = &live.trigger.name;
        let mut kept = Vec::with_capacity(batch.len());
        for (message, reason) in batch {
            if live
                .answered
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&message.id)
            {
                continue;
            }
            let verdict = live.on_message(&self.h.hooks, &message).await;
            // For the status view's hook counts (a drop is also its own `dropped` note).
            if live.resolved.hooks.on_message.is_some() {
                let (persona, channel) = self.who();
                self.out(Note::only_json(Event::HookRan {
                    persona,
                    channel,
                    id: message.id.to_hex(),
                    hook: "on_message".into(),
                    kept: verdict.is_ok(),
                }));
            }
            match verdict {
                Ok(()) => kept.push((message, reason)),
                Err(e) => {
                    let id = message.id.to_hex();
                    tracing::warn!(persona = %name, event = %id, "message dropped by on_message: {e}");
                    let (persona, channel) = self.who();
                    self.out(Note::new(
                        Event::Dropped {
                            persona,
                            channel,
                            id: id.clone(),
                            hook: "on_message".into(),
                            reason: e.to_string(),
                        },
                        format!("dropped {name} {id}: on_message: {e}"),
                    ));
                }
            }
        }
        kept
    }

    /// The prompt, retried on a fresh agent when the agent dies under it (supervision).
    async fn prompt(&self, ask: &Ask<'_>) -> Result<Turn, DispatchError> {
        let (live, config) = (&self.live, &self.h.config);
        let (name, id) = (&live.trigger.name, ask.id);
        let mut attempts = 0;
        loop {
            let mut agent = live.current().await;
            if !agent.client.is_alive() {
                agent = live.restart(agent.generation(), &self.h.out).await?;
            }
            let Some(session) = agent.sessions.get(&self.channel).cloned() else {
                return Err(DispatchError::NoSession);
            };
            let prefix = agent
                .prefix
                .as_ref()
                .map(|(base, system)| (base.as_deref(), system.as_str()));
            let text = prompt::assemble(
                prefix,
                &ask.ctx,
                &ask.reason,
                &ask.thread,
                &ask.earlier,
                ask.message,
            );
            attempts += 1;
            let (persona, channel) = self.who();
            self.out(Note::only_json(Event::Prompt {
                persona,
                channel,
                id: id.to_string(),
                session: session.to_string(),
                attempt: attempts,
                batch: ask.earlier.len() + 1,
            }));
            match agent
                .client
                .prompt(&session, text, config.idle_timeout, config.turn_timeout)
                .await
            {
                Ok(t) => return Ok(t),
                Err(AcpError::Exited) if live.policy().retries(attempts) => {
                    tracing::warn!(persona = %name, event = %id, "agent exited during the turn; restarting and retrying");
                    let (persona, channel) = self.who();
                    self.out(Note::new(
                        Event::Crashed {
                            persona,
                            channel,
                            id: id.to_string(),
                            attempt: attempts,
                        },
                        format!("crashed {name} {id}: agent exited during the turn; retrying"),
                    ));
                    live.restart(agent.generation(), &self.h.out).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The turn's text to the publisher, once per trigger, unless it is empty or publishing is
    /// off.
    async fn deliver(&self, ask: &Ask<'_>, turn: Turn) {
        let (name, id, message) = (&self.live.trigger.name, ask.id, ask.message);
        // Never two replies to one trigger, whatever happened above.
        {
            let mut answered = self.live.answered.lock().unwrap_or_else(|e| e.into_inner());
            if !answered.insert(message.id) {
                return;
            }
            for (m, _) in &ask.earlier {
                answered.insert(m.id);
            }
        }
        let reply = turn.text.trim();
        if reply.is_empty() {
            let stop = format!("{:?}", turn.stop_reason);
            let text = format!("turn {name} {id}: no text ({stop})");
            self.unpublished(id, None, format!("no text ({stop})"), text);
            return;
        }
        if !self.h.config.publish {
            let text = format!(
                "turn {name} {id}: {} bytes, not published (--no-publish)",
                reply.len()
            );
            self.unpublished(id, Some(reply.len()), "--no-publish".into(), text);
            return;
        }
        let (reply, found) = self.h.redactor.redact(reply);
        if !found.is_empty() {
            let what = found.join(" and ");
            tracing::warn!(persona = %name, event = %id, "reply contained {what}: redacted");
            let (persona, channel) = self.who();
            self.out(Note::new(
                Event::Redacted {
                    persona,
                    channel,
                    id: id.to_string(),
                    found: found.iter().map(|f| f.to_string()).collect(),
                },
                format!(
                    "redacted {name} {id}: the reply contained {what}; published with it replaced"
                ),
            ));
        }
        // Signing and the relay's acknowledgement happen on the publisher: the next message of
        // this (persona, channel) does not wait for them.
        let reply = Reply {
            trigger: message.clone(),
            text: reply,
            earlier: ask.earlier.iter().map(|(m, _)| m.id).collect(),
        };
        if self.publish_tx.send(reply).await.is_err() {
            tracing::error!(persona = %name, event = %id, "reply publisher stopped; reply lost");
        }
    }
}

/// With reply checks on (several replicas), whether the relay already holds a reply by this
/// persona to `message`; if so it is noted as answered and reported as `answered_elsewhere`
/// (`stage`: checked before the `turn` or before `publish`). See [`cluster`].
async fn answered_elsewhere(
    h: &Harness,
    live: &Live,
    channel_name: &str,
    message: &Message,
    stage: &'static str,
) -> bool {
    if !h.config.cluster.check_replies {
        return false;
    }
    let client = persona_relay(live, h).await;
    let Some(reply) = cluster::reply_on_relay(&client, live.keys.public_key(), message).await
    else {
        return false;
    };
    live.answered
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(message.id);
    let (name, id) = (&live.trigger.name, message.id.to_hex());
    let reply = reply.to_hex();
    tracing::info!(persona = %name, event = %id, "already answered by {reply}; skipped");
    let text = format!("answered {name} {id}: already answered by {reply} ({stage})");
    (h.out)(Note::new(
        Event::AnsweredElsewhere {
            persona: name.clone(),
            channel: channel_name.to_string(),
            id,
            reply,
            stage: stage.into(),
        },
        text,
    ));
    true
}

/// A reply to publish: the agent's final text and the message it answers.
struct Reply {
    trigger: Message,
    text: String,
    /// The earlier messages of the batch it also answers.
    earlier: Vec<nostr_sdk::prelude::EventId>,
}

/// Signs (on the blocking pool: a signature costs tens of microseconds) and publishes one
/// worker's replies in order, each with its persona's key.
struct Publisher {
    h: Harness,
    live: Arc<Live>,
    channel_name: String,
}

impl Publisher {
    async fn run(self, mut rx: mpsc::Receiver<Reply>) {
        let name = &self.live.trigger.name;
        while let Some(reply) = rx.recv().await {
            let id = reply.trigger.id.to_hex();
            // A panic while publishing loses this reply only, and says so.
            let published = AssertUnwindSafe(self.publish(reply))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| {
                    let why = DispatchError::panicked("while publishing the reply", panic);
                    tracing::error!(persona = %name, event = %id, "{why}");
                    Err(why)
                });
            match published {
                Ok(None) => {}
                Ok(Some((reply_id, thread))) => {
                    let text = format!("reply {name} {reply_id} to {id}");
                    (self.h.out)(Note::new(
                        Event::Reply {
                            persona: name.clone(),
                            channel: self.channel_name.clone(),
                            id: reply_id,
                            to: id,
                            thread,
                        },
                        text,
                    ));
                }
                Err(why) => {
                    let text = format!("error {name} {id}: {why}");
                    let (persona, channel) = (name.clone(), self.channel_name.clone());
                    let event =
                        super::error::event(Some(persona), Some(channel), Some(id), &why, &[]);
                    (self.h.out)(super::error::explained(event, text, &[]))
                }
            }
        }
    }

    /// Signs and publishes one reply: its id and thread root (hex) once the relay took it; `None`
    /// when another replica answered first.
    async fn publish(
        &self,
        reply: Reply,
    ) -> Result<Option<(String, Option<String>)>, DispatchError> {
        let Reply {
            trigger,
            text,
            earlier,
        } = reply;
        let (live, h) = (&self.live, &self.h);
        if answered_elsewhere(h, live, &self.channel_name, &trigger, "publish").await {
            return Ok(None);
        }
        let mode = ReplyMode {
            thread_replies: live.resolved.thread_replies,
            broadcast_replies: live.resolved.broadcast_replies,
        };
        let mut tags = relay::reply_tags(&trigger, mode);
        tags.push(relay::hop_tag(super::team::next_hop(Some(&trigger))));
        // Among replicas, the reply names every message it answers, so that the relay check
        // finds it for the earlier ones of a batch too.
        if h.config.cluster.check_replies {
            tags.extend(earlier.into_iter().map(relay::answered_tag));
        }
        let keys = live.keys.clone();
        let channel = trigger.channel.clone();
        let event = tokio::task::spawn_blocking(move || {
            relay::message(&keys, &channel, &text, tags).map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
        .map_err(DispatchError::Sign)?;
        send(h, live, &event).await?;
        h.replies.fetch_add(1, Ordering::SeqCst);
        Ok(Some(published(&event)))
    }
}

/// Publishes a persona's signed message (a reply, or a post through its tools), then routes it
/// here as the relay would: it may hand work to another persona of this harness (see
/// [`super::team`]; the subscription skips the harness's own events).
pub(super) async fn send(
    h: &Harness,
    live: &Live,
    event: &nostr_sdk::Event,
) -> Result<(), DispatchError> {
    h.echoes.expect(event.id);
    if let Some(door) = h.config.relay.door() {
        door.publish(event)
            .await
            .map_err(|why| DispatchError::Refused(vec![why]))?;
        super::route::route(&h.router, event);
        return Ok(());
    }
    let client = persona_relay(live, h).await;
    let mut sent = client.send_event(event).await;
    // A relay that wants authentication only for writing says so now: retry once on the
    // persona's own authenticated connection.
    if let Ok(o) = &sent
        && o.success.is_empty()
        && o.failed
            .values()
            .any(|why| why.starts_with("auth-required:"))
        && !h.auth.swap(true, Ordering::SeqCst)
    {
        let own = persona_relay(live, h).await;
        sent = own.send_event(event).await;
    }
    match sent {
        Ok(o) if !o.success.is_empty() => {
            super::route::route(&h.router, event);
            Ok(())
        }
        Ok(o) => Err(DispatchError::Refused(o.failed.values().cloned().collect())),
        Err(e) => Err(DispatchError::Publish(e.to_string())),
    }
}

/// A published reply's id and thread root (hex).
fn published(event: &nostr_sdk::Event) -> (String, Option<String>) {
    let thread = Message::parse(event)
        .and_then(|m| m.root)
        .map(|r| r.to_hex());
    (event.id.to_hex(), thread)
}
