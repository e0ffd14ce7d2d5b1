//! The embedded relay's door for events (see [`Door`]): the one way into its store, for clients'
//! events (from the front) and for those signed in this process (from the harness).

use std::net::SocketAddr;
use std::sync::Arc;

use nostr_relay_builder::prelude::*;

use crate::known_keys::Owner;
use crate::limits::Admission;
use crate::store::{NotStored, Put, Store};
use crate::tap::{Tap, Taps};

/// The embedded relay's door for events: a client's (taken by the front, checked here) and those
/// signed in this process (the harness's replies), stored, journaled and fanned out to
/// subscribers without a round trip through the library's websocket. Before, every reply cost
/// the relay a parse and a Schnorr verification, as much as the message it answered: the door
/// took the relay's CPU a message from 412 to 313 µs at 1,000 msg/s (`live_agents`, same sitting).
#[derive(Clone, Debug)]
pub struct Door {
    pub(crate) relay: LocalRelay,
    pub(crate) store: Arc<Store>,
    pub(crate) admission: Arc<Admission>,
    /// Subscribers in this process (see [`crate::tap`]).
    pub(crate) taps: Taps,
}

impl Door {
    /// Stores and fans out `event`, signed in this process (no rate limit: the harness has its own
    /// turn limits; no second signature check: it signed it a moment before); why not, in the
    /// words of a relay's `OK false`. An event the relay already has is accepted again (and not
    /// sent out twice).
    pub async fn publish(&self, event: &Event) -> Result<(), String> {
        if let Some(why) = self.admission.check_own(event) {
            return Err(why);
        }
        self.store_and_fan_out(event, Owner::Own).await.map(|_| ())
    }

    /// Every event stored from now on, in process (see [`crate::tap`]).
    pub fn tap(&self) -> Tap {
        self.taps.open(crate::tap::CAPACITY)
    }

    /// The stored events `filter` matches, oldest first: what a subscription with that filter
    /// replays before its live events.
    pub async fn stored(&self, filter: Filter) -> Result<Vec<Event>, String> {
        let events = self.store.query(filter).await.map_err(|e| e.to_string())?;
        let mut events = events.to_vec();
        events.sort_by_key(|e| (e.created_at, e.id));
        Ok(events)
    }

    /// A client's event on connection `peer`: id and signature checked, then the kinds and rate
    /// limits, then stored and fanned out. The `OK` message's text: empty, or a duplicate's note;
    /// `Err` for `OK false`.
    pub(crate) async fn accept(
        &self,
        event: &Event,
        peer: SocketAddr,
    ) -> Result<&'static str, String> {
        // Checked first: the rate buckets are charged only for a key's genuine events.
        if !event.verify_id() {
            return Err("invalid: event id does not match its content".to_string());
        }
        if !event.verify_signature() {
            return Err("invalid: event signature does not verify".to_string());
        }
        let owner = self.admission.owner_of(event);
        if let Some(why) = self.admission.check(event, owner, peer) {
            return Err(why);
        }
        self.store_and_fan_out(event, owner).await
    }

    /// A connection ended: its rate bucket goes.
    pub(crate) fn forget(&self, peer: SocketAddr) {
        self.admission.forget(peer);
    }

    async fn store_and_fan_out(&self, event: &Event, owner: Owner) -> Result<&'static str, String> {
        match self.store.put(event, owner).await {
            Ok(Put::Stored | Put::Ephemeral) => {
                self.relay.notify_event(event.clone());
                self.taps.offer(event).await;
                Ok("")
            }
            Ok(Put::Duplicate) => Ok("duplicate: already have this event"),
            Err(NotStored::Database(e)) => {
                tracing::error!("relay: cannot store an event: {e}");
                Err(NotStored::Database(e).to_string())
            }
            Err(why) => Err(why.to_string()),
        }
    }
}
