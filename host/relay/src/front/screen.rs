//! What the front does with each message of one client connection, decided on the message as
//! [`client_message::parse`] read it:
//!
//! - a message it does not understand (or over the size cap) is answered with a refusal;
//! - `AUTH` is checked here (NIP-42, [`nip42`]) against the connection's challenge, which is sent
//!   as soon as the connection opens when authentication is required, and the allow-list;
//! - `EVENT` is taken through the relay's [`Door`] (checked, stored, fanned out, answered);
//! - `REQ`, `COUNT` (NIP-45, with NIP-50 `search` too) and `CLOSE` go to the relay library,
//!   serialised again from what was parsed, once the connection is authenticated when that is
//!   required; before, `REQ` and `COUNT` are answered `CLOSED` with `auth-required`.

use std::net::SocketAddr;

use nostr_relay_builder::prelude::*;

use crate::client_message::{self, Request};
use crate::front::Front;
use crate::nip42;

/// What to do with one client message.
pub(crate) enum Step {
    /// Send these to the client; nothing goes to the library.
    Reply(Vec<String>),
    /// Give this to the library.
    Pass(String),
}

/// One connection's screen.
pub(crate) struct Screen<'f> {
    front: &'f Front,
    peer: SocketAddr,
    auth: nip42::Session,
}

impl<'f> Screen<'f> {
    pub fn new(front: &'f Front, peer: SocketAddr) -> Screen<'f> {
        Screen {
            front,
            peer,
            auth: nip42::Session::new(),
        }
    }

    /// The largest websocket message read whole.
    pub fn max_message_bytes(&self) -> usize {
        self.front.limits.max_message_bytes()
    }

    /// What the relay says first: the challenge, when authentication is required.
    pub fn greeting(&self) -> Option<String> {
        self.front
            .allow
            .is_some()
            .then(|| self.auth.challenge_message())
    }

    pub async fn on_text(&mut self, text: &str) -> Step {
        let request = match client_message::parse(text, self.front.limits.max_event_bytes) {
            Ok(request) => request,
            Err(refused) => return Step::Reply(vec![refused.answer()]),
        };
        match request {
            Request::Auth(ev) => Step::Reply(vec![self.authenticate(&ev)]),
            Request::Event(ev) => Step::Reply(self.event(&ev).await),
            Request::Req { ref id, .. } | Request::Count { ref id, .. } if self.locked_out() => {
                let closed = RelayMessage::Closed {
                    subscription_id: std::borrow::Cow::Borrowed(id),
                    message: AUTH_REQUIRED.into(),
                };
                Step::Reply(vec![self.auth.challenge_message(), closed.as_json()])
            }
            other => Step::Pass(other.to_json()),
        }
    }

    /// Authentication is required and this connection has not authenticated.
    fn locked_out(&self) -> bool {
        self.front.allow.is_some() && self.auth.authenticated().is_none()
    }

    fn authenticate(&mut self, ev: &Event) -> String {
        let allowed = |pk: &PublicKey| self.front.allow.as_ref().is_none_or(|a| a.allows(pk));
        let outcome = self
            .auth
            .authenticate(ev, &self.front.identity, allowed, Timestamp::now());
        if let Err(nip42::AuthRefused::NotAllowed(pk)) = &outcome {
            tracing::warn!(pubkey = %pk, "relay: refused authentication from a key outside the allow-list");
        }
        ok_message(ev.id, outcome.map(|_| "").map_err(|e| e.to_string()))
    }

    async fn event(&mut self, ev: &Event) -> Vec<String> {
        if self.locked_out() {
            let refusal = ok_message(ev.id, Err(AUTH_REQUIRED.to_string()));
            return vec![self.auth.challenge_message(), refusal];
        }
        // NIP-70: a protected event is published by its author, authenticated, only.
        if ev.is_protected() && self.auth.authenticated() != Some(ev.pubkey) {
            let why = "auth-required: a protected event is published by its authenticated author";
            return vec![
                self.auth.challenge_message(),
                ok_message(ev.id, Err(why.to_string())),
            ];
        }
        vec![ok_message(
            ev.id,
            self.front.door.accept(ev, self.peer).await,
        )]
    }
}

const AUTH_REQUIRED: &str = "auth-required: this relay serves authenticated clients only (NIP-42)";

/// The relay's `OK` for event `id`: accepted (with a note, e.g. a duplicate's) or refused, why.
pub(crate) fn ok_message(id: EventId, outcome: Result<&str, String>) -> String {
    let (status, message) = match outcome {
        Ok(note) => (true, note.to_string()),
        Err(why) => (false, why),
    };
    RelayMessage::Ok {
        event_id: id,
        status,
        message: std::borrow::Cow::Owned(message),
    }
    .as_json()
}
