//! The Buzz relay model over Nostr (NIP-01 websocket through `nostr-sdk`):
//!
//! - a channel is a NIP-29 group: its id travels in an `h` tag (the first; an event whose `h` tags
//!   disagree belongs to no channel); a channel *name* (what `subscribe` lists, `#` stripped) maps
//!   to an id through kind 39000 group metadata (`d` = id, `name` tag) signed by a
//!   [`ChannelAuthority`] (the relay's own key from its NIP-11 document, or keys the operator
//!   names), never by whoever publishes it; without such metadata a name is its own id;
//! - messages are kind 9; NIP-10 `e` tags with `root`/`reply` markers make threads; `p` tags are
//!   mentions;
//! - [`embedded`] runs a relay in-process on 127.0.0.1 for the zero-set-up case, behind [`front`]
//!   (NIP-11, every message parsed once by [`client_message`], NIP-42 by [`nip42`]) with [`limits`]
//!   (rates), [`kinds`] (what it stores) and a [`store`] whose [`ledger`] shares storage out;
//! - [`tap`] hands the embedded relay's new events to the harness in this process, with no
//!   websocket subscription between them;
//! - [`echo`] drops the harness's own events coming back on its subscription before they are
//!   verified again;
//! - [`keys`] is the operator's key store: each persona signs with its own key, and, when the relay
//!   asks for NIP-42 authentication, authenticates with it on a connection of its own (relays bind
//!   one authenticated key to a connection).
//!
//! Events from a relay are hostile: [`Message::parse`] caps sizes and never panics.

pub mod client_message;
pub mod door;
pub mod echo;
pub mod embedded;
pub mod error;
pub mod front;
pub mod keys;
pub mod kinds;
pub mod known_keys;
pub mod ledger;
pub mod limits;
pub mod nip42;
pub mod store;
pub mod tap;

use std::collections::BTreeMap;
use std::time::Duration;

use nostr_sdk::prelude::*;

/// The Blossom blob server the embedded relay can run on its port.
pub use apiary_blobs as blobs;
pub use error::{JournalProblem, RelayError};

/// NIP-29 chat message.
pub const KIND_MESSAGE: u16 = 9;
/// NIP-29 group metadata (relay-signed).
pub const KIND_GROUP_METADATA: u16 = 39000;
/// Message text beyond this is cut before it reaches a prompt.
pub const MAX_CONTENT: usize = 32 * 1024;
/// The first retry after losing the relay.
pub const RECONNECT_INTERVAL: Duration = Duration::from_secs(2);
/// Events with more tags than this are ignored.
pub const MAX_TAGS: usize = 256;

/// A chat message as the dispatcher sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: EventId,
    pub author: PublicKey,
    pub channel: String,
    pub content: String,
    pub created_at: Timestamp,
    /// The thread root, when the message is a reply.
    pub root: Option<EventId>,
    /// The message replied to directly (the root for a top-level reply).
    pub parent: Option<EventId>,
    /// Hex public keys in `p` tags.
    pub mentions: Vec<PublicKey>,
    /// The tags as sent (for the prompt), bounded.
    pub tags: Vec<Vec<String>>,
    /// How many persona-to-persona steps led to it (its `hop` tag, see [`hop_tag`]); `None`
    /// when it carries none. Only a persona's own message is believed (the harness clears it for
    /// everyone else's).
    pub hop: Option<u32>,
}

impl Message {
    /// A kind-9 event with an `h` tag; `None` for anything else.
    pub fn parse(ev: &Event) -> Option<Message> {
        if ev.kind != Kind::Custom(KIND_MESSAGE) || ev.tags.len() > MAX_TAGS {
            return None;
        }
        let mut channel = None;
        let mut root = None;
        let mut reply = None;
        let mut unmarked = Vec::new();
        let mut mentions = Vec::new();
        let mut tags = Vec::new();
        let mut hop = None;
        for tag in ev.tags.iter() {
            let s = tag.as_slice();
            tags.push(
                s.iter()
                    .take(8)
                    .map(|v| v.chars().take(256).collect())
                    .collect(),
            );
            match s {
                [k, v, ..] if k == "h" => match &channel {
                    None => channel = Some(v.chars().take(256).collect::<String>()),
                    // Two channels in one event: which one it is for depends on who reads it
                    // (a relay matches `#h` on any of them), so it is for none.
                    Some(first) if !v.chars().take(256).eq(first.chars()) => return None,
                    Some(_) => {}
                },
                [k, v, rest @ ..] if k == "e" => {
                    let Ok(id) = EventId::from_hex(v) else {
                        continue;
                    };
                    match rest.get(1).map(String::as_str) {
                        Some("root") => root = Some(id),
                        Some("reply") => reply = Some(id),
                        // NIP-10: a mention is no part of the thread.
                        Some("mention") => {}
                        _ => unmarked.push(id),
                    }
                }
                [k, v, ..] if k == "p" => {
                    if let Ok(pk) = PublicKey::from_hex(v) {
                        mentions.push(pk);
                    }
                }
                [k, v, ..] if k == HOP => hop = v.parse::<u32>().ok().map(|h| h.min(HOP_MAX)),
                _ => {}
            }
        }
        // NIP-10 positional form (deprecated): first `e` is the root, last the reply.
        if root.is_none() && reply.is_none() && !unmarked.is_empty() {
            root = unmarked.first().copied();
            reply = unmarked.last().copied();
        }
        let root = root.or(reply);
        let parent = reply.or(root);
        let mut content = ev.content.clone();
        if content.len() > MAX_CONTENT {
            let mut end = MAX_CONTENT;
            while !content.is_char_boundary(end) {
                end -= 1;
            }
            content.truncate(end);
        }
        Some(Message {
            id: ev.id,
            author: ev.pubkey,
            channel: channel.filter(|c| !c.is_empty())?,
            content,
            created_at: ev.created_at,
            root,
            parent,
            mentions,
            tags,
            hop,
        })
    }

    pub fn in_thread(&self) -> bool {
        self.root.is_some()
    }
}

/// Where a reply goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyMode {
    pub thread_replies: bool,
    pub broadcast_replies: bool,
}

/// Tags of a reply to `trigger`: always the channel; with `thread_replies`, in the trigger's thread
/// (NIP-10 `root` + `reply`) when it came from one, else as a thread under the trigger (`root`);
/// without it, in the main channel, quoting the trigger (`q`). `broadcast_replies` adds `["broadcast","1"]` to threaded replies. The author is
/// tagged with `p` so clients notify them.
pub fn reply_tags(trigger: &Message, mode: ReplyMode) -> Vec<Tag> {
    let mut tags = vec![channel_tag(&trigger.channel)];
    let threaded = match trigger.root {
        Some(root) if mode.thread_replies => {
            tags.push(e_tag(root, "root"));
            tags.push(e_tag(trigger.id, "reply"));
            true
        }
        None if mode.thread_replies => {
            tags.push(e_tag(trigger.id, "root"));
            true
        }
        // Spec §10: with `thread_replies: false` no reply opens or joins a thread.
        _ => {
            tags.push(Tag::custom(TagKind::q(), [trigger.id.to_hex()]));
            false
        }
    };
    if threaded && mode.broadcast_replies {
        tags.push(Tag::custom(TagKind::custom("broadcast"), ["1"]));
    }
    tags.push(Tag::public_key(trigger.author));
    tags
}

/// The tag naming how many persona-to-persona steps led to a persona's message: `["hop", "<n>"]`.
/// It travels in the event, so every replica reads the same count.
pub const HOP: &str = "hop";
/// A `hop` tag's value is read as at most this.
const HOP_MAX: u32 = 1000;

pub fn hop_tag(hop: u32) -> Tag {
    Tag::custom(TagKind::custom(HOP), [hop.to_string()])
}

/// Tags a person's message gets when it replies to `parent` (whose own thread root is `root`).
pub fn thread_tags(parent: EventId, root: Option<EventId>) -> Vec<Tag> {
    match root {
        Some(root) if root != parent => vec![e_tag(root, "root"), e_tag(parent, "reply")],
        _ => vec![e_tag(parent, "root")],
    }
}

/// An `e` tag naming a message a reply also answers (an earlier one of a batch), marked
/// `mention` so that it takes no part in threading (NIP-10).
pub fn answered_tag(id: EventId) -> Tag {
    e_tag(id, "mention")
}

pub fn channel_tag(channel: &str) -> Tag {
    Tag::custom(TagKind::single_letter(Alphabet::H, false), [channel])
}

fn e_tag(id: EventId, marker: &str) -> Tag {
    Tag::custom(
        TagKind::single_letter(Alphabet::E, false),
        [id.to_hex(), String::new(), marker.to_string()],
    )
}

/// A kind-9 message for `channel` with `tags`, signed by `keys`.
pub fn message(keys: &Keys, channel: &str, content: &str, mut tags: Vec<Tag>) -> Result<Event> {
    if !tags
        .iter()
        .any(|t| t.as_slice().first().is_some_and(|k| k == "h"))
    {
        tags.insert(0, channel_tag(channel));
    }
    Ok(EventBuilder::new(Kind::Custom(KIND_MESSAGE), content)
        .tags(tags)
        .sign_with_keys(keys)?)
}

/// A filter for the messages of `channels` from `since` on.
pub fn channel_filter(channels: &[String], since: Timestamp) -> Filter {
    Filter::new()
        .kind(Kind::Custom(KIND_MESSAGE))
        .custom_tags(
            SingleLetterTag::lowercase(Alphabet::H),
            channels.iter().cloned(),
        )
        .since(since)
}

/// A connected client without a key: it cannot answer a NIP-42 challenge.
pub async fn connect(url: &str, timeout: Duration) -> Result<Client, RelayError> {
    connect_as(url, timeout, None).await
}

/// A connected client that answers NIP-42 `AUTH` challenges with `keys` (nostr-sdk authenticates
/// automatically, then re-sends the subscriptions and events the relay refused with
/// `auth-required`). Events are still signed before sending, each with its persona's key.
pub async fn connect_as(
    url: &str,
    timeout: Duration,
    keys: Option<Keys>,
) -> Result<Client, RelayError> {
    Ok(connect_watched(url, timeout, keys).await?.0)
}

/// The relay I/O runtime: one thread of its own for the harness's relay connections (websocket
/// reads, the relay pool's per-event parse and signature check), so that work never queues in
/// front of the harness's dispatch and agent pipes on the caller's runtime. Process-wide, started
/// on first use, never stopped (its thread idles when nothing is connected).
pub fn io_runtime() -> Result<&'static tokio::runtime::Handle, RelayError> {
    static RT: RuntimeSlot = std::sync::OnceLock::new();
    one_thread_runtime(&RT, "apiary-relay-io")
}

/// The embedded relay's runtime: a thread of its own, apart from [`io_runtime`], so the relay's
/// work (verifying, storing and fanning out every event it is sent) and the client's (parsing and
/// verifying what the relay sends it) run side by side instead of queueing behind each other.
pub fn relay_runtime() -> Result<&'static tokio::runtime::Handle, RelayError> {
    static RT: RuntimeSlot = std::sync::OnceLock::new();
    one_thread_runtime(&RT, "apiary-relay")
}

/// A runtime, or why it could not be started (kept: the start is not retried).
type RuntimeSlot = std::sync::OnceLock<std::io::Result<tokio::runtime::Runtime>>;

fn one_thread_runtime(
    slot: &'static RuntimeSlot,
    name: &'static str,
) -> Result<&'static tokio::runtime::Handle, RelayError> {
    let rt = slot.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(name)
            .enable_all()
            .build()
    });
    match rt {
        Ok(rt) => Ok(rt.handle()),
        Err(e) => Err(RelayError::Runtime {
            name,
            detail: e.to_string(),
        }),
    }
}

/// Runs `fut` on the [`io_runtime`]: tasks it spawns (a relay client's connection) live there.
pub async fn on_io_runtime<F>(fut: F) -> Result<F::Output, RelayError>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_on(io_runtime()?, "relay I/O", fut).await
}

/// Shuts `client` down on the [`io_runtime`], where its connection tasks run. nostr-relay-pool 0.44
/// wakes a connection task before it marks the relay terminated: from another thread the task can
/// close its websocket in between, find the relay still live and reconnect, and the process then
/// exits with that new connection open (the relay logs a reset without a closing handshake; 1 in
/// 15-20 `apiary post`s did). On the runtime's one thread nothing runs between the two steps.
pub async fn shutdown(client: &Client) {
    let client = client.clone();
    // An error means there is no I/O runtime, so no connection task to stop either.
    let _ = on_io_runtime(async move { client.shutdown().await }).await;
}

/// Runs `fut` on the [`relay_runtime`]: tasks it spawns (an embedded relay's listener and
/// connections) live there.
pub async fn on_relay_runtime<F>(fut: F) -> Result<F::Output, RelayError>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_on(relay_runtime()?, "embedded relay", fut).await
}

async fn spawn_on<F>(
    rt: &tokio::runtime::Handle,
    what: &'static str,
    fut: F,
) -> Result<F::Output, RelayError>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.spawn(fut).await.map_err(|e| RelayError::Task {
        what,
        detail: e.to_string(),
    })
}

/// Like [`connect_as`], with the client's notifications from before the connection was opened (so
/// an `AUTH` challenge sent on connect is not missed). The connection runs on the [`io_runtime`].
pub async fn connect_watched(
    url: &str,
    timeout: Duration,
    keys: Option<Keys>,
) -> Result<
    (
        Client,
        tokio::sync::broadcast::Receiver<RelayPoolNotification>,
    ),
    RelayError,
> {
    let url = url.to_string();
    on_io_runtime(async move { connect_here(&url, timeout, keys, None).await }).await?
}

/// Like [`connect_watched`], for the harness's subscription, through `transport`: the events in
/// its [`echo::Echoes`] (the harness's own) are dropped when they come back on the watched
/// subscription.
pub async fn connect_skipping_echoes(
    url: &str,
    timeout: Duration,
    keys: Option<Keys>,
    transport: echo::SkipEchoes,
) -> Result<
    (
        Client,
        tokio::sync::broadcast::Receiver<RelayPoolNotification>,
    ),
    RelayError,
> {
    let url = url.to_string();
    on_io_runtime(async move { connect_here(&url, timeout, keys, Some(transport)).await }).await?
}

async fn connect_here(
    url: &str,
    timeout: Duration,
    keys: Option<Keys>,
    transport: Option<echo::SkipEchoes>,
) -> Result<
    (
        Client,
        tokio::sync::broadcast::Receiver<RelayPoolNotification>,
    ),
    RelayError,
> {
    let mut builder = Client::builder();
    if let Some(keys) = keys {
        builder = builder.signer(keys);
    }
    if let Some(transport) = transport {
        builder = builder.websocket_transport(transport);
    }
    let client = builder.build();
    let notifications = client.notifications();
    // Reconnect quickly after a relay restart (backing off while it stays down); the REQs are
    // re-sent on reconnection.
    let opts = RelayOptions::new()
        .flags(RelayServiceFlags::default())
        .retry_interval(RECONNECT_INTERVAL)
        .adjust_retry_interval(true);
    client
        .pool()
        .add_relay(url, opts)
        .await
        .map_err(|e| RelayError::Url {
            url: url.to_string(),
            detail: e.to_string(),
        })?;
    client.connect().await;
    client.wait_for_connection(timeout).await;
    let connected = client
        .relays()
        .await
        .values()
        .any(|r| r.status() == RelayStatus::Connected);
    if !connected {
        client.shutdown().await;
        return Err(RelayError::Connect {
            url: url.to_string(),
            timeout,
        });
    }
    Ok((client, notifications))
}

/// Whose kind 39000 group metadata names channels: the relay's own key (the `pubkey` of its NIP-11
/// document) and keys the operator configured. Metadata from any other key is ignored, so a
/// stranger cannot re-point a channel name to a group of their own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelAuthority {
    /// The relay's key, when its information document names one.
    pub relay: Option<PublicKey>,
    /// Keys the operator named (`--channel-authority`).
    pub configured: Vec<PublicKey>,
}

impl ChannelAuthority {
    pub fn keys(&self) -> Vec<PublicKey> {
        let mut keys: Vec<PublicKey> = self.relay.iter().copied().collect();
        keys.extend(self.configured.iter().filter(|k| Some(**k) != self.relay));
        keys
    }

    /// One line for humans: who may give channels their names (keys cut to 16 hex digits; the
    /// `--json` event has them whole).
    pub fn describe(&self) -> String {
        let short = |k: &PublicKey| k.to_hex()[..16].to_string();
        let mut by: Vec<String> = self
            .relay
            .iter()
            .map(|k| format!("the relay's key {}", short(k)))
            .collect();
        if !self.configured.is_empty() {
            let keys: Vec<String> = self.configured.iter().map(short).collect();
            by.push(format!("--channel-authority {}", keys.join(", ")));
        }
        match by.is_empty() {
            true => "channels are named by nobody: channel names are used as ids".to_string(),
            false => format!("channels are named by {}", by.join(" and ")),
        }
    }

    /// For `--json`: `{"relay": hex|null, "configured": [hex]}`.
    pub fn to_json(&self) -> (Option<String>, Vec<String>) {
        (
            self.relay.map(|k| k.to_hex()),
            self.configured.iter().map(|k| k.to_hex()).collect(),
        )
    }
}

/// The `pubkey` of the relay information document (NIP-11) of the relay at `url`, fetched over
/// HTTP(S) with `Accept: application/nostr+json`; `None` when it has none or cannot be reached.
pub async fn relay_pubkey(url: &str, timeout: Duration) -> Option<PublicKey> {
    let info = front::info_url(url)?;
    let fetched = tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .max_redirects(0)
            .user_agent(concat!("apiary/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        agent
            .get(&info)
            .header("Accept", "application/nostr+json")
            .call()
            .ok()?
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .ok()
    })
    .await
    .ok()
    .flatten()?;
    let doc: serde_json::Value = serde_json::from_str(&fetched).ok()?;
    PublicKey::from_hex(doc.get("pubkey")?.as_str()?).ok()
}

/// Maps channel names to group ids through kind 39000 metadata signed by `authority`; a name
/// without such metadata is its own id. When an authority names one channel twice, its newest
/// metadata wins.
pub async fn resolve_channels(
    client: &Client,
    names: &[String],
    authority: &ChannelAuthority,
    timeout: Duration,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = names.iter().map(|n| (n.clone(), n.clone())).collect();
    let authors = authority.keys();
    if names.is_empty() || authors.is_empty() {
        return out;
    }
    let filter = Filter::new()
        .kind(Kind::Custom(KIND_GROUP_METADATA))
        .authors(authors.iter().copied())
        .limit(500);
    let Ok(events) = client.fetch_events(filter, timeout).await else {
        return out;
    };
    let mut newest: BTreeMap<String, (Timestamp, EventId)> = BTreeMap::new();
    // The relay's filter is not trusted to have applied `authors`.
    for ev in events.iter().filter(|e| authors.contains(&e.pubkey)) {
        let (Some(id), Some(name)) = (first_tag(ev, "d"), first_tag(ev, "name")) else {
            continue;
        };
        let Some(slot) = out.get_mut(name) else {
            continue;
        };
        let stamp = (ev.created_at, ev.id);
        if newest.get(name).is_none_or(|n| stamp > *n) {
            newest.insert(name.to_string(), stamp);
            *slot = id.to_string();
        }
    }
    out
}

fn first_tag<'a>(ev: &'a Event, name: &str) -> Option<&'a str> {
    ev.tags.iter().find_map(|t| match t.as_slice() {
        [k, v, ..] if k == name => Some(v.as_str()),
        _ => None,
    })
}

/// The short form of an id for human output.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(keys: &Keys, content: &str, tags: Vec<Tag>) -> Event {
        message(keys, "general", content, tags).unwrap()
    }

    #[test]
    fn parses_threads_and_mentions() {
        let k = Keys::generate();
        let other = Keys::generate().public_key();
        let top = ev(&k, "hi", vec![Tag::public_key(other)]);
        let m = Message::parse(&top).unwrap();
        assert_eq!(m.channel, "general");
        assert_eq!(m.mentions, [other]);
        assert!(!m.in_thread());

        let reply = ev(&k, "re", thread_tags(top.id, None));
        let r = Message::parse(&reply).unwrap();
        assert_eq!((r.root, r.parent), (Some(top.id), Some(top.id)));

        let nested = ev(&k, "re2", thread_tags(reply.id, Some(top.id)));
        let n = Message::parse(&nested).unwrap();
        assert_eq!((n.root, n.parent), (Some(top.id), Some(reply.id)));
    }

    #[test]
    fn reply_tags_follow_thread_settings() {
        let k = Keys::generate();
        let top = Message::parse(&ev(&k, "hi", vec![])).unwrap();
        let on = ReplyMode {
            thread_replies: true,
            broadcast_replies: false,
        };
        let tags: Vec<Vec<String>> = reply_tags(&top, on)
            .into_iter()
            .map(|t| t.to_vec())
            .collect();
        assert!(tags.contains(&vec!["e".into(), top.id.to_hex(), "".into(), "root".into()]));

        let root = EventId::all_zeros();
        let mut threaded = top.clone();
        threaded.root = Some(root);
        let tags: Vec<Vec<String>> = reply_tags(
            &threaded,
            ReplyMode {
                thread_replies: true,
                broadcast_replies: true,
            },
        )
        .into_iter()
        .map(|t| t.to_vec())
        .collect();
        assert!(tags.contains(&vec!["e".into(), root.to_hex(), "".into(), "root".into()]));
        assert!(tags.contains(&vec![
            "e".into(),
            top.id.to_hex(),
            "".into(),
            "reply".into()
        ]));
        assert!(tags.contains(&vec!["broadcast".into(), "1".into()]));

        let flat = reply_tags(
            &threaded,
            ReplyMode {
                thread_replies: false,
                broadcast_replies: true,
            },
        );
        assert!(!flat.iter().any(|t| t.as_slice()[0] == "e"));

        // A top-level trigger with `thread_replies: false`: the channel, quoting it, no new thread.
        let off = ReplyMode {
            thread_replies: false,
            broadcast_replies: true,
        };
        let tags: Vec<Vec<String>> = reply_tags(&top, off)
            .into_iter()
            .map(|t| t.to_vec())
            .collect();
        assert!(!tags.iter().any(|t| t[0] == "e"), "{tags:?}");
        assert!(
            tags.contains(&vec!["q".into(), top.id.to_hex()]),
            "{tags:?}"
        );
        assert!(!tags.iter().any(|t| t[0] == "broadcast"), "{tags:?}");
    }

    #[test]
    fn ignores_other_kinds_and_channel_less_events() {
        let k = Keys::generate();
        let note = EventBuilder::text_note("x").sign_with_keys(&k).unwrap();
        assert!(Message::parse(&note).is_none());
        let no_h = EventBuilder::new(Kind::Custom(9), "x")
            .sign_with_keys(&k)
            .unwrap();
        assert!(Message::parse(&no_h).is_none());
    }

    #[test]
    fn events_naming_two_channels_belong_to_none() {
        let k = Keys::generate();
        let h = |c: &str| channel_tag(c);
        let two = ev(&k, "x", vec![h("general"), h("elsewhere")]);
        assert!(Message::parse(&two).is_none());
        let same = ev(&k, "x", vec![h("general"), h("general")]);
        assert_eq!(Message::parse(&same).unwrap().channel, "general");
    }
}
