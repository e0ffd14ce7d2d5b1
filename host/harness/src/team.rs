//! Personas as a team: who the harness's personas are to each other ([`Member`]), which of them a
//! persona's message may wake ([`Handoff`]), and how far a chain of personas waking personas may
//! go (the hop count each persona message carries in its `hop` tag).
//!
//! A persona's message (a reply, or a post through apiary's tools) is routed like a person's, with
//! three more rules, each refusal reported as a `handoff_stopped` event:
//! - a persona never wakes itself;
//! - the woken persona's `x-woken-by` (or the operator's `woken_by`) must admit the author
//!   (default: personas of its own pack);
//! - the message's hop count must be below the operator's `--hop-limit`: a reply or post made
//!   while answering a message of hop `n` carries `n + 1`, and a person's message is hop 0;
//! - a reply does not wake again a persona the message it answers already woke (a reply quoting
//!   "@ada @bob" to a message that asked both is not a new request to either).
//!
//! Only explicit mentions (`@name`) and keywords wake from a persona's message: the `p` tag every
//! reply carries for its trigger's author would otherwise wake the asker on every answer.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use apiary_core::pack::woken_by;
use nostr_sdk::prelude::{EventId, PublicKey};

use crate::relay::Message;
use crate::resolve::ResolvedPersona;

/// The default `--hop-limit`: a person's message, a handoff, its answer, one more round.
pub const DEFAULT_HOP_LIMIT: u32 = 4;

/// A persona of this harness (or of another replica of it), as others see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub pack: String,
    pub name: String,
    pub display_name: String,
    pub description: String,
    /// Channel names it subscribes to.
    pub channels: Vec<String>,
    pub pubkey: PublicKey,
    pub woken_by: Option<Vec<String>>,
    /// It runs in this process (not on another replica).
    pub local: bool,
}

impl Member {
    pub fn of(pack: &str, persona: &ResolvedPersona, pubkey: PublicKey, local: bool) -> Member {
        Member {
            pack: pack.to_string(),
            name: persona.identity.name.clone(),
            display_name: persona.identity.display_name.clone(),
            description: persona.identity.description.clone(),
            channels: persona.subscribe.clone(),
            pubkey,
            woken_by: persona.woken_by.clone(),
            local,
        }
    }

    /// `pack/name`.
    pub fn qualified(&self) -> String {
        format!("{}/{}", self.pack, self.name)
    }

    /// Whether a message of `from` may wake this persona.
    pub fn admits(&self, from: &Member) -> bool {
        woken_by::admits(self.woken_by.as_deref(), &self.pack, &from.pack, &from.name)
    }
}

/// Why a persona's message does not wake a persona the triggers chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Itself,
    NotAllowed,
    HopLimit,
    AlreadyWoken,
}

impl Stop {
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Itself => "self",
            Stop::NotAllowed => "not-allowed",
            Stop::HopLimit => "hop-limit",
            Stop::AlreadyWoken => "already-woken",
        }
    }
}

/// The handoff rules for one persona's message.
pub struct Handoff {
    pub from: Arc<Member>,
    /// The message's hop count (a persona message without a `hop` tag counts as 1).
    pub hop: u32,
    pub limit: u32,
}

impl Handoff {
    pub fn of(from: Arc<Member>, message: &Message, limit: u32) -> Handoff {
        Handoff {
            from,
            hop: message.hop.unwrap_or(1),
            limit,
        }
    }

    /// Whether it may wake `to`, or why not.
    pub fn check(&self, to: &Member) -> Result<(), Stop> {
        if to.pubkey == self.from.pubkey {
            return Err(Stop::Itself);
        }
        if !to.admits(&self.from) {
            return Err(Stop::NotAllowed);
        }
        if self.hop >= self.limit {
            return Err(Stop::HopLimit);
        }
        Ok(())
    }

    /// The stop's explanation, for the event and the log.
    pub fn why(&self, stop: Stop, to: &Member) -> String {
        let from = self.from.qualified();
        match stop {
            Stop::Itself => "a persona's message never wakes the persona itself".into(),
            Stop::NotAllowed => format!(
                "{} does not let {from} wake it (x-woken-by or the operator's woken_by)",
                to.qualified()
            ),
            Stop::AlreadyWoken => "the message it answers already woke this persona".into(),
            Stop::HopLimit => format!(
                "hop limit reached: the message is hop {} of at most {} persona-to-persona steps (--hop-limit)",
                self.hop, self.limit
            ),
        }
    }
}

/// The hop count of a reply or post made while answering `trigger`.
pub fn next_hop(trigger: Option<&Message>) -> u32 {
    trigger.map_or(1, |m| m.hop.unwrap_or(0).saturating_add(1))
}

/// Messages remembered with the personas they woke.
const WOKE_CAP: usize = 4096;

/// Which personas recent messages woke, for [`Stop::AlreadyWoken`].
#[derive(Default)]
pub struct Woke {
    by: HashMap<EventId, Vec<PublicKey>>,
    order: VecDeque<EventId>,
}

impl Woke {
    pub fn record(&mut self, id: EventId, woken: Vec<PublicKey>) {
        if woken.is_empty() || self.by.insert(id, woken).is_some() {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > WOKE_CAP
            && let Some(old) = self.order.pop_front()
        {
            self.by.remove(&old);
        }
    }

    pub fn woke(&self, id: &EventId, persona: &PublicKey) -> bool {
        self.by.get(id).is_some_and(|w| w.contains(persona))
    }
}
