//! The embedded relay's new events, handed to a subscriber in this process (the harness of `apiary
//! up`) as they are stored, instead of over a websocket subscription.
//!
//! Over a subscription the relay serialises every event for the harness's connection, and the
//! harness's relay client parses it again: about a third of the CPU a message cost at the ceiling.
//! A [`Tap`] receives each stored event as the [`Door`](crate::door::Door) stores it, already
//! checked (id, signature, kinds, rate limits), with no copy through JSON. What a subscription's
//! filter did (channels, `since`) the subscriber does itself; what it replayed on subscribing,
//! [`Door::stored`](crate::door::Door::stored) answers from the store.
//!
//! The channel is bounded: a subscriber that falls [`CAPACITY`] events behind slows the door
//! (clients wait for their `OK`) instead of losing events, and says how far behind it is
//! ([`Tap::depth`], [`Tapped::at`]).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use nostr_sdk::prelude::Event;
use tokio::sync::mpsc;

/// Events a tap holds before the door waits for its subscriber.
pub const CAPACITY: usize = 65_536;

/// One stored event, and when the door stored it.
#[derive(Debug)]
pub struct Tapped {
    pub event: Event,
    pub at: Instant,
}

/// The receiving end: the relay's new events, in the order it stored them.
#[derive(Debug)]
pub struct Tap {
    rx: mpsc::Receiver<Tapped>,
}

impl Tap {
    /// Waits for events and moves up to `limit` of them into `into`; 0 when the relay is gone.
    pub async fn recv_many(&mut self, into: &mut Vec<Tapped>, limit: usize) -> usize {
        self.rx.recv_many(into, limit).await
    }

    /// Events stored and not yet taken.
    pub fn depth(&self) -> usize {
        self.rx.len()
    }
}

/// The door's side: every open tap.
#[derive(Debug, Clone, Default)]
pub(crate) struct Taps {
    open: Arc<Mutex<Vec<mpsc::Sender<Tapped>>>>,
}

impl Taps {
    pub(crate) fn open(&self, capacity: usize) -> Tap {
        let (tx, rx) = mpsc::channel(capacity);
        self.lock().push(tx);
        Tap { rx }
    }

    /// Hands `event` to every open tap; a full one is waited for, a closed one forgotten.
    pub(crate) async fn offer(&self, event: &Event) {
        let at = Instant::now();
        let tapped = || Tapped {
            event: event.clone(),
            at,
        };
        // Sent under the lock without waiting (the usual case, no allocation beyond the event's
        // copy); only a full tap is waited for, after the lock is released.
        let full: Vec<(mpsc::Sender<Tapped>, Tapped)> = {
            let mut open = self.lock();
            if open.is_empty() {
                return;
            }
            // Benchmark probe (`benches/live_agents.rs`): the relay hands the event over.
            tracing::trace!(target: "apiary::probe", id = %event.id, "event tapped");
            open.retain(|tx| !tx.is_closed());
            open.iter()
                .filter_map(|tx| match tx.try_send(tapped()) {
                    Err(mpsc::error::TrySendError::Full(t)) => Some((tx.clone(), t)),
                    _ => None,
                })
                .collect()
        };
        for (tx, t) in full {
            tracing::debug!("the relay waits for an in-process subscriber that fell behind");
            let _ = tx.send(t).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<mpsc::Sender<Tapped>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::*;

    fn note(text: &str) -> Event {
        EventBuilder::text_note(text)
            .sign_with_keys(&Keys::generate())
            .expect("signed")
    }

    #[tokio::test]
    async fn every_open_tap_gets_each_event_in_order_and_a_dropped_one_is_forgotten() {
        let taps = Taps::default();
        let mut a = taps.open(CAPACITY);
        let b = taps.open(CAPACITY);
        drop(b);
        let (one, two) = (note("one"), note("two"));
        taps.offer(&one).await;
        taps.offer(&two).await;
        assert_eq!(a.depth(), 2);
        let mut got = Vec::new();
        assert_eq!(a.recv_many(&mut got, 10).await, 2);
        let ids: Vec<EventId> = got.iter().map(|t| t.event.id).collect();
        assert_eq!(ids, vec![one.id, two.id]);
        assert_eq!(taps.lock().len(), 1, "the dropped tap is forgotten");
    }

    #[tokio::test]
    async fn a_full_tap_makes_the_door_wait_instead_of_losing_events() {
        let taps = Taps::default();
        let mut tap = taps.open(4);
        let early = note("early");
        for _ in 0..4 {
            taps.offer(&early).await;
        }
        let last = note("last");
        let offering = {
            let taps = taps.clone();
            let last = last.clone();
            tokio::spawn(async move { taps.offer(&last).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !offering.is_finished(),
            "the door waits while the tap is full"
        );
        let mut got = Vec::new();
        tap.recv_many(&mut got, 1).await;
        offering
            .await
            .expect("the offer completes once there is room");
        assert_eq!(tap.depth(), 4);
        let mut rest = Vec::new();
        tap.recv_many(&mut rest, 4).await;
        assert_eq!(rest.last().map(|t| t.event.id), Some(last.id));
    }

    #[tokio::test]
    async fn the_embedded_relay_taps_what_it_stored_and_never_what_it_refused() {
        let relay = crate::embedded::Embedded::start("127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap();
        let door = relay.door();
        let keys = Keys::generate();
        let before = crate::message(&keys, "general", "before the tap", vec![]).unwrap();
        let sender = crate::connect(&relay.url, std::time::Duration::from_secs(5))
            .await
            .unwrap();
        assert!(!sender.send_event(&before).await.unwrap().success.is_empty());
        let mut tap = door.tap();
        let genuine = crate::message(&keys, "general", "genuine", vec![]).unwrap();
        let forged = Event::new(
            genuine.id,
            genuine.pubkey,
            genuine.created_at,
            genuine.kind,
            genuine.tags.clone(),
            "forged content",
            genuine.sig,
        );
        assert!(sender.send_event(&forged).await.unwrap().success.is_empty());
        assert!(
            !sender
                .send_event(&genuine)
                .await
                .unwrap()
                .success
                .is_empty()
        );
        let own = crate::message(&keys, "general", "signed here", vec![]).unwrap();
        door.publish(&own).await.unwrap();
        let mut got = Vec::new();
        while got.len() < 2 {
            tap.recv_many(&mut got, 10).await;
        }
        let ids: Vec<EventId> = got.iter().map(|t| t.event.id).collect();
        assert_eq!(
            ids,
            vec![genuine.id, own.id],
            "live events only, the forgery refused"
        );
        // What a subscription would replay comes from the store (one second: any order).
        let filter = crate::channel_filter(&["general".into()], Timestamp::from(0));
        let stored: Vec<EventId> = door
            .stored(filter)
            .await
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect();
        let mut expected = vec![before.id, genuine.id, own.id];
        expected.sort();
        let mut sorted = stored.clone();
        sorted.sort();
        assert_eq!(sorted, expected);
        sender.shutdown().await;
        relay.shutdown();
    }
}
