//! Our own events coming back. The harness subscribes to the channels it replies in, so the
//! relay sends every reply back on that subscription; the relay pool would parse it and check its
//! signature (the costliest step of receiving an event) only for the dispatcher to drop it as the
//! harness's own. [`Echoes`] remembers the ids the harness signed, and the connection's transport
//! drops an `EVENT` for the harness's subscription that carries one of them before the pool sees
//! it. Everything else (and our events on any other subscription, such as a thread-context fetch)
//! still goes through the pool's verification.
//!
//! The process's own embedded relay needs none of this: the harness takes its events from the
//! relay's [`tap`](crate::tap), not from a subscription.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nostr_sdk::nostr::util::BoxedFuture;
use nostr_sdk::pool::ConnectionMode;
use nostr_sdk::pool::transport::error::TransportError;
use nostr_sdk::pool::transport::websocket::{
    DefaultWebsocketTransport, WebSocketSink, WebSocketStream, WebSocketTransport,
};
use nostr_sdk::prelude::*;

/// Ids remembered; echoes arrive within moments of publishing.
const CAP: usize = 8192;

/// Ids of the events the harness published, and the subscription whose echoes are dropped.
#[derive(Debug, Default)]
pub struct Echoes {
    ids: Mutex<Ids>,
    /// The harness's subscription.
    watched: OnceLock<SubscriptionId>,
    /// `["EVENT","<subscription id>",` for the harness's subscription.
    prefix: OnceLock<String>,
}

#[derive(Debug, Default)]
struct Ids {
    set: HashSet<EventId>,
    order: VecDeque<EventId>,
}

impl Echoes {
    /// Drops echoes arriving on `sub` from now on.
    pub fn watch(&self, sub: &SubscriptionId) {
        let _ = self.watched.set(sub.clone());
        let _ = self
            .prefix
            .set(format!("[\"EVENT\",{},", serde_json::json!(sub.as_str())));
    }

    /// Remembers an event about to be published (before it is sent: the echo may come back
    /// before the relay's `OK`).
    pub fn expect(&self, id: EventId) {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if ids.set.insert(id) {
            ids.order.push_back(id);
            if ids.order.len() > CAP
                && let Some(old) = ids.order.pop_front()
            {
                ids.set.remove(&old);
            }
        }
    }

    /// Whether a relay message is the echo of one of our events on the watched subscription.
    /// Only an exact, compact `["EVENT","<sub>",{..."id":"<hex>"...}]` counts: the first
    /// `"id":"` after the prefix is the event's `id` key (a JSON string cannot hold an unescaped
    /// quote). A message that does not look like that is left to the pool.
    pub fn is_echo(&self, text: &str) -> bool {
        let Some(id) = self.watched_id(text) else {
            return false;
        };
        let echo = self
            .ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set
            .contains(&id);
        if !echo {
            // Benchmark probe (`benches/live_agents.rs`): an event frame for the harness's
            // subscription arrived, before the relay pool parses and verifies it.
            tracing::trace!(target: "apiary::probe", id = %id, "frame received");
        }
        echo
    }

    /// The event id of an `EVENT` frame for the watched subscription (see [`Echoes::is_echo`]).
    fn watched_id(&self, text: &str) -> Option<EventId> {
        let rest = text
            .trim_start()
            .strip_prefix(self.prefix.get()?.as_str())?;
        let at = rest.find("\"id\":\"")?;
        EventId::from_hex(rest.get(at + 6..at + 6 + 64)?).ok()
    }
}

/// The default websocket transport, dropping [`Echoes`] on the way in.
#[derive(Clone, Debug)]
pub struct SkipEchoes {
    echoes: Arc<Echoes>,
}

impl SkipEchoes {
    pub fn new(echoes: Arc<Echoes>) -> SkipEchoes {
        SkipEchoes { echoes }
    }
}

impl WebSocketTransport for SkipEchoes {
    fn support_ping(&self) -> bool {
        DefaultWebsocketTransport.support_ping()
    }

    fn connect<'a>(
        &'a self,
        url: &'a Url,
        mode: &'a ConnectionMode,
        timeout: Duration,
    ) -> BoxedFuture<'a, Result<(WebSocketSink, WebSocketStream), TransportError>> {
        Box::pin(async move {
            let (sink, stream) = DefaultWebsocketTransport
                .connect(url, mode, timeout)
                .await?;
            let echoes = Arc::clone(&self.echoes);
            let stream = stream.filter_map(move |m| {
                let echo = match &m {
                    Ok(msg) => msg.as_text().is_some_and(|t| echoes.is_echo(t)),
                    Err(_) => false,
                };
                ready(if echo { None } else { Some(m) })
            });
            Ok((sink, Box::pin(stream) as WebSocketStream))
        })
    }
}

fn ready<T: Send + 'static>(item: T) -> BoxedFuture<'static, T> {
    Box::pin(std::future::ready(item))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_ids_on_the_watched_subscription_are_echoes() {
        let keys = Keys::generate();
        let ours = crate::message(&keys, "general", "mine", vec![]).unwrap();
        let theirs = crate::message(&keys, "general", "not published by us", vec![]).unwrap();
        let echoes = Echoes::default();
        let sub = SubscriptionId::new("main");
        let msg = |sub: &str, ev: &Event| {
            RelayMessage::event(SubscriptionId::new(sub), ev.clone()).as_json()
        };
        echoes.expect(ours.id);
        // Not watching yet: nothing is dropped.
        assert!(!echoes.is_echo(&msg("main", &ours)));
        echoes.watch(&sub);
        assert!(echoes.is_echo(&msg("main", &ours)));
        assert!(!echoes.is_echo(&msg("main", &theirs)));
        // Our event on another subscription (a fetch) goes to the pool.
        assert!(!echoes.is_echo(&msg("fetch", &ours)));
        // Our id quoted in someone's content (escaped in JSON) is not the event's id, whatever
        // the key order.
        let reordered = format!(
            "[\"EVENT\",\"main\",{{\"content\":{},\"id\":\"{}\"}}]",
            serde_json::json!(format!("\"id\":\"{}\"", ours.id)),
            theirs.id
        );
        assert!(!echoes.is_echo(&reordered));
        assert!(!echoes.is_echo("[\"EVENT\",\"main\","));
        assert!(!echoes.is_echo("not json"));
    }

    #[tokio::test]
    async fn a_live_subscription_skips_our_echoes_and_fetches_still_see_them() {
        let relay = crate::embedded::Embedded::start("127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap();
        let t = Duration::from_secs(5);
        let echoes = Arc::new(Echoes::default());
        let (client, mut notes) = crate::connect_skipping_echoes(
            &relay.url,
            t,
            None,
            SkipEchoes::new(Arc::clone(&echoes)),
        )
        .await
        .unwrap();
        let filter = crate::channel_filter(&["general".into()], Timestamp::from(0));
        let sub = client.subscribe(filter.clone(), None).await.unwrap().val;
        echoes.watch(&sub);
        let keys = Keys::generate();
        let ours = crate::message(&keys, "general", "ours", vec![]).unwrap();
        let other = crate::message(&keys, "general", "someone else's", vec![]).unwrap();
        echoes.expect(ours.id);
        // Sent on another connection: the watching client's own database would also hide what
        // it sent itself.
        let sender = crate::connect(&relay.url, t).await.unwrap();
        assert!(!sender.send_event(&ours).await.unwrap().success.is_empty());
        assert!(!sender.send_event(&other).await.unwrap().success.is_empty());
        let mut seen = Vec::new();
        let _ = tokio::time::timeout(Duration::from_millis(500), async {
            while let Ok(n) = notes.recv().await {
                if let RelayPoolNotification::Event { event, .. } = n {
                    seen.push(event.id);
                }
            }
        })
        .await;
        assert_eq!(seen, [other.id]);
        let fetched = client.fetch_events(filter, t).await.unwrap();
        assert!(fetched.iter().any(|e| e.id == ours.id));
        client.shutdown().await;
        sender.shutdown().await;
        relay.shutdown();
    }

    /// A relay that fans out what it is given without checking it (`notify_event` skips the
    /// relay's own verification), so the client's check is all that stands between.
    async fn unchecking_relay() -> (nostr_relay_builder::LocalRelay, String) {
        let relay = nostr_relay_builder::LocalRelay::new(
            nostr_relay_builder::RelayBuilder::default().addr("127.0.0.1".parse().unwrap()),
        );
        relay.run().await.unwrap();
        let url = relay.url().await.to_string();
        (relay, url)
    }

    /// `good` with its content changed (the id no longer matches) and with another event's
    /// signature (the id matches, the signature does not).
    fn forgeries(good: &Event, other: &Event) -> [Event; 2] {
        let forge = |content: &str, sig| {
            Event::new(
                good.id,
                good.pubkey,
                good.created_at,
                good.kind,
                good.tags.clone(),
                content,
                sig,
            )
        };
        let changed = forge("forged content", good.sig);
        let bad_sig = forge(&good.content, other.sig);
        assert!(changed.verify().is_err() && bad_sig.verify().is_err());
        [changed, bad_sig]
    }

    async fn subscribed(
        url: &str,
        transport: SkipEchoes,
        echoes: &Echoes,
    ) -> (
        Client,
        tokio::sync::broadcast::Receiver<RelayPoolNotification>,
    ) {
        let (client, notes) =
            crate::connect_skipping_echoes(url, Duration::from_secs(5), None, transport)
                .await
                .unwrap();
        let filter = crate::channel_filter(&["general".into()], Timestamp::from(0));
        let sub = client.subscribe(filter, None).await.unwrap().val;
        echoes.watch(&sub);
        (client, notes)
    }

    async fn pool_events(
        notes: &mut tokio::sync::broadcast::Receiver<RelayPoolNotification>,
    ) -> Vec<Event> {
        let mut seen = Vec::new();
        let _ = tokio::time::timeout(Duration::from_millis(500), async {
            while let Ok(n) = notes.recv().await {
                if let RelayPoolNotification::Event { event, .. } = n {
                    seen.push(*event);
                }
            }
        })
        .await;
        seen
    }

    #[tokio::test]
    async fn forged_events_from_an_untrusted_relay_are_still_rejected() {
        let (relay, url) = unchecking_relay().await;
        let echoes = Arc::new(Echoes::default());
        let (client, mut notes) =
            subscribed(&url, SkipEchoes::new(Arc::clone(&echoes)), &echoes).await;
        let keys = Keys::generate();
        let good = crate::message(&keys, "general", "genuine", vec![]).unwrap();
        let other = crate::message(&keys, "general", "other", vec![]).unwrap();
        // Let the relay take the subscription before it fans anything out.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for forged in forgeries(&good, &other) {
            assert!(relay.notify_event(forged));
        }
        assert!(relay.notify_event(good.clone()));
        let seen = pool_events(&mut notes).await;
        assert_eq!(seen, [good]);
        client.shutdown().await;
        relay.shutdown();
    }
}
