//! apiary's own tools for one session of a persona's agent, behind `apiary-mcp`: reading the
//! thread and channels it is in, posting as itself, and listing whom it may hand work to. The
//! agent holds no key: a post is signed here with the persona's, counted in its limits, and routed
//! like a reply (so `@name` in it hands work over; see [`super::team`]).
//!
//! Every answer covers the persona's own channels only, whatever the input names.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use apiary_mcp::{ToolCall, ToolError};
use futures_util::future::BoxFuture;
use nostr_sdk::prelude::*;
use serde_json::{Value, json};

use super::event::Event;
use super::live::Live;
use super::team::{self, Member};
use super::{Harness, Note, fetch_messages, lock, persona_relay};
use crate::relay::{self, KIND_MESSAGE, Message};

/// How long a read waits for the relay.
const FETCH: Duration = Duration::from_secs(3);
/// Messages a search looks through, newest first.
const SEARCH_SCAN: usize = 500;

pub(super) use super::live::Binding;

/// One session's tools: its persona and, for a channel's session, that channel (id).
pub(super) struct SessionTools {
    pub h: Harness,
    pub live: Binding,
    pub channel: Option<String>,
}

impl apiary_mcp::Backend for SessionTools {
    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(self.answer(call))
    }
}

fn tool_name(call: &ToolCall) -> &'static str {
    match call {
        ToolCall::ReadThread { .. } => "read_thread",
        ToolCall::ReadChannel { .. } => "read_channel",
        ToolCall::Search { .. } => "search_channel",
        ToolCall::Post { .. } => "post",
        ToolCall::ListPersonas => "list_personas",
    }
}

impl SessionTools {
    async fn answer(&self, call: ToolCall) -> Result<Value, ToolError> {
        let live = self
            .live
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| ToolError::new("this persona is not running (yet)"))?;
        let tool = tool_name(&call);
        let result = match call {
            ToolCall::ReadThread { thread, limit } => self.read_thread(&live, thread, limit).await,
            ToolCall::ReadChannel {
                channel,
                since,
                limit,
            } => {
                let (id, name) = self.channel_of(&live, channel.as_deref())?;
                let filter = channel_filter(&id, since, None, limit);
                let messages = self.fetch(&live, filter, &id).await;
                Ok(json!({"channel": name, "messages": self.views(&live, messages).await}))
            }
            ToolCall::Search {
                channel,
                text,
                author,
                since,
                until,
                limit,
            } => {
                let (id, name) = self.channel_of(&live, channel.as_deref())?;
                let filter = channel_filter(&id, since, until, SEARCH_SCAN);
                let messages = self.fetch(&live, filter, &id).await;
                let mut found = self.views(&live, messages).await;
                found.retain(|v| matches(v, text.as_deref(), author.as_deref()));
                let skip = found.len().saturating_sub(limit);
                found.drain(..skip);
                Ok(json!({"channel": name, "messages": found}))
            }
            ToolCall::Post {
                channel,
                thread,
                text,
            } => self.post(&live, channel.as_deref(), thread, &text).await,
            ToolCall::ListPersonas => Ok(self.list_personas(&live)),
        };
        let reason = result.as_ref().err().map(|e| e.0.clone());
        (self.h.out)(Note::only_json(Event::ApiaryTool {
            persona: live.trigger.name.clone(),
            tool: tool.into(),
            ok: reason.is_none(),
            reason,
        }));
        result
    }

    /// The channel a call names (by name, `#name` or id), which must be one the persona
    /// subscribes to; none named: this session's.
    fn channel_of(&self, live: &Live, named: Option<&str>) -> Result<(String, String), ToolError> {
        let find = |want: &str| {
            let want = want.trim().trim_start_matches('#');
            live.channels
                .iter()
                .find(|(id, name)| *id == want || name.as_str() == want)
                .map(|(id, name)| (id.clone(), name.clone()))
        };
        match named.or(self.channel.as_deref()) {
            Some(want) => find(want).ok_or_else(|| {
                ToolError::new(format!(
                    "you do not subscribe to `{want}`; your channels: {}",
                    list(&live.channels)
                ))
            }),
            None => Err(ToolError::new(format!(
                "name a channel: yours are {}",
                list(&live.channels)
            ))),
        }
    }

    /// Verified messages of `channel` the filter finds, oldest first.
    async fn fetch(&self, live: &Live, filter: Filter, channel: &str) -> Vec<Message> {
        let client = persona_relay(live, &self.h).await;
        fetch_messages(&client, filter, channel, FETCH).await
    }

    /// One message by id, when it is in a channel the persona subscribes to.
    async fn message(&self, live: &Live, id: &str) -> Result<Message, ToolError> {
        let id = EventId::from_hex(id).map_err(|_| ToolError::new("not a message id"))?;
        let client = persona_relay(live, &self.h).await;
        let events = client
            .fetch_events(Filter::new().id(id).kind(Kind::Custom(KIND_MESSAGE)), FETCH)
            .await
            .unwrap_or_default();
        events
            .iter()
            .filter(|e| e.verify().is_ok())
            .filter_map(Message::parse)
            .find(|m| live.channels.contains_key(&m.channel))
            .ok_or_else(|| {
                ToolError::new(format!(
                    "no message {} in a channel you subscribe to",
                    id.to_hex()
                ))
            })
    }

    async fn read_thread(
        &self,
        live: &Live,
        thread: Option<String>,
        limit: usize,
    ) -> Result<Value, ToolError> {
        let start = match thread {
            Some(id) => self.message(live, &id).await?,
            None => {
                let channel = self.channel.as_deref().unwrap_or_default();
                live.turn_now(channel).ok_or_else(|| {
                    ToolError::new("you are not answering a message now: name a `thread`")
                })?
            }
        };
        let root = start.root.unwrap_or(start.id);
        let replies = Filter::new()
            .kind(Kind::Custom(KIND_MESSAGE))
            .event(root)
            .custom_tag(
                SingleLetterTag::lowercase(Alphabet::H),
                start.channel.clone(),
            )
            .limit(limit);
        let mut messages = self.fetch(live, replies, &start.channel).await;
        if let Ok(root_message) = self.message(live, &root.to_hex()).await {
            messages.insert(0, root_message);
        }
        messages.dedup_by_key(|m| m.id);
        // The root, then the latest replies.
        if messages.len() > limit {
            let cut = messages.len() - limit;
            messages.drain(1..1 + cut);
        }
        let channel = live
            .channels
            .get(&start.channel)
            .cloned()
            .unwrap_or_default();
        Ok(json!({"channel": channel, "thread": root.to_hex(),
                  "messages": self.views(live, messages).await}))
    }

    /// What the agent sees of messages: author names (a persona's own, else the author's
    /// profile), whether a persona of this harness wrote each.
    async fn views(&self, live: &Live, messages: Vec<Message>) -> Vec<Value> {
        let members = self.members();
        let strangers: Vec<PublicKey> = messages
            .iter()
            .map(|m| m.author)
            .filter(|a| !members.contains_key(a))
            .collect();
        let names = self.profile_names(live, strangers).await;
        messages
            .iter()
            .map(|m| {
                let member = members.get(&m.author);
                let name = member
                    .map(|p| p.display_name.clone())
                    .or_else(|| names.get(&m.author).cloned());
                json!({
                    "id": m.id.to_hex(),
                    "author": m.author.to_bech32().unwrap_or_default(),
                    "name": name,
                    "persona": member.map(|p| p.qualified()),
                    "created_at": m.created_at.as_secs(),
                    "thread": m.root.map(|r| r.to_hex()),
                    "text": m.content,
                })
            })
            .collect()
    }

    /// Display names from the authors' kind 0 profiles (within the fetch time).
    async fn profile_names(
        &self,
        live: &Live,
        mut authors: Vec<PublicKey>,
    ) -> HashMap<PublicKey, String> {
        authors.sort();
        authors.dedup();
        if authors.is_empty() {
            return HashMap::new();
        }
        let client = persona_relay(live, &self.h).await;
        let filter = Filter::new().kind(Kind::Metadata).authors(authors);
        let events = client.fetch_events(filter, FETCH).await.unwrap_or_default();
        events
            .iter()
            .filter(|e| e.verify().is_ok())
            .filter_map(|e| {
                let meta = Metadata::from_json(&e.content).ok()?;
                let name = meta.display_name.or(meta.name)?;
                Some((e.pubkey, name.chars().take(64).collect()))
            })
            .collect()
    }

    fn members(&self) -> HashMap<PublicKey, Arc<Member>> {
        let guard = self.h.router.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().map(|r| r.own.clone()).unwrap_or_default()
    }

    fn list_personas(&self, live: &Live) -> Value {
        let members = self.members();
        let Some(me) = members.get(&live.keys.public_key()) else {
            return json!({"personas": []});
        };
        let mut can: Vec<&Arc<Member>> = members
            .values()
            .filter(|m| m.pubkey != me.pubkey && m.admits(me))
            .collect();
        can.sort_by_key(|m| m.qualified());
        let personas: Vec<Value> = can
            .iter()
            .map(|m| {
                json!({"name": m.name, "pack": m.pack, "display_name": m.display_name,
                       "description": m.description, "channels": m.channels,
                       "mention": format!("@{}", m.name)})
            })
            .collect();
        json!({"personas": personas})
    }

    async fn post(
        &self,
        live: &Arc<Live>,
        channel: Option<&str>,
        thread: Option<String>,
        text: &str,
    ) -> Result<Value, ToolError> {
        let (channel_id, channel_name) = self.channel_of(live, channel)?;
        let root = match thread {
            Some(id) => {
                let m = self.message(live, &id).await?;
                if m.channel != channel_id {
                    return Err(ToolError::new(format!(
                        "that thread is not in #{channel_name}"
                    )));
                }
                Some(m.root.unwrap_or(m.id))
            }
            None => None,
        };
        let now = Instant::now();
        if !live.take_post(&channel_id, now) {
            return Err(ToolError::new(format!(
                "you are over your turns in #{channel_name} ({}); nothing was posted",
                super::flood::turns(live.turns.per_channel)
            )));
        }
        if let Err(over) = lock(&live.budget).take(now) {
            return Err(ToolError::new(format!(
                "you are over your {}: {over}; nothing was posted",
                over.limit
            )));
        }
        let (text, found) = self.h.redactor.redact(text);
        if !found.is_empty() {
            (self.h.out)(Note::new(
                Event::Redacted {
                    persona: live.trigger.name.clone(),
                    channel: channel_name.clone(),
                    id: String::new(),
                    found: found.iter().map(|f| f.to_string()).collect(),
                },
                format!(
                    "redacted {}: a post contained {}; posted with it replaced",
                    live.trigger.name,
                    found.join(" and ")
                ),
            ));
        }
        let hop = team::next_hop(
            live.turn_now(self.channel.as_deref().unwrap_or_default())
                .as_ref(),
        );
        let mut tags = vec![relay::channel_tag(&channel_id), relay::hop_tag(hop)];
        if let Some(root) = root {
            tags.extend(relay::thread_tags(root, Some(root)));
        }
        let event = relay::message(&live.keys, &channel_id, &text, tags)
            .map_err(|e| ToolError::new(format!("signing the post failed: {e}")))?;
        super::worker::send(&self.h, live, &event)
            .await
            .map_err(|e| ToolError::new(format!("the relay did not take the post: {e}")))?;
        let id = event.id.to_hex();
        let thread = root.map(|r| r.to_hex());
        let name = &live.trigger.name;
        (self.h.out)(Note::new(
            Event::Posted {
                persona: name.clone(),
                channel: channel_name.clone(),
                id: id.clone(),
                thread: thread.clone(),
                hop,
            },
            format!("posted {name} {id} #{channel_name}"),
        ));
        Ok(json!({"id": id, "channel": channel_name, "thread": thread}))
    }
}

fn channel_filter(id: &str, since: Option<u64>, until: Option<u64>, limit: usize) -> Filter {
    let from = Timestamp::from(since.unwrap_or(0));
    let f = relay::channel_filter(&[id.to_string()], from).limit(limit);
    match until {
        Some(u) => f.until(Timestamp::from(u)),
        None => f,
    }
}

/// A message view matches every word of `text` (case-insensitive) and the `author` (a name, a
/// persona's `pack/name`, an npub or a hex key).
fn matches(view: &Value, text: Option<&str>, author: Option<&str>) -> bool {
    let field = |k: &str| view[k].as_str().unwrap_or_default().to_lowercase();
    if let Some(text) = text {
        let body = field("text");
        if !text
            .to_lowercase()
            .split_whitespace()
            .all(|w| body.contains(w))
        {
            return false;
        }
    }
    if let Some(author) = author {
        let want = author.trim().trim_start_matches('@').to_lowercase();
        let hex = PublicKey::parse(&want).map(|k| k.to_bech32().unwrap_or_default());
        let persona = field("persona");
        let found = field("name") == want
            || persona == want
            || persona.rsplit('/').next() == Some(want.as_str())
            || hex.is_ok_and(|npub| field("author") == npub.to_lowercase());
        if !found {
            return false;
        }
    }
    true
}

fn list(channels: &BTreeMap<String, String>) -> String {
    let names: Vec<String> = channels.values().map(|n| format!("#{n}")).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
