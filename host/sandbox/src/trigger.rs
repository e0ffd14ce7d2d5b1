//! Trigger front end: which messages wake which persona, decided by a `trigger` component —
//! by default the built-in `trigger-default` (embedded in the binary), which implements the spec's
//! semantics. A matcher's failure (trap, deadline, invalid answer) means "do not wake".
//!
//! Both releases run ([`Calls`]). A `0.2` matcher gets its personas once, as a `persona-set`
//! resource it prepares (indexes, automaton) and keeps: the runner gives every distinct list of
//! personas an id ([`SetIds`]) and each kept store holds the sets it made, by id ([`Sets`]), so a
//! batch crosses with its messages only. A `0.1` matcher gets the personas with every batch.

use std::sync::{Arc, Mutex};

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Instance, ResourceAny};

use super::bindings::v0_1::trigger::exports::apiary::plugin::matcher as wit1;
use super::bindings::v0_2::trigger::exports::apiary::plugin::matcher as wit2;
use super::hook::export_indexes;
use super::warm::WarmPool;
use super::{CallOutput, Grants, Limits, Loaded, Release, Sandbox, SandboxError, State, World};
/// The host's types for a decision (the same in both releases).
pub use wit1::{Decision, Message, Persona, Reason};

mod table;

/// The name the built-in matcher goes by in messages.
pub const DEFAULT_NAME: &str = "trigger-default (built in)";

/// Whether a reason is one that wakes the persona.
pub fn wakes(reason: &Reason) -> bool {
    matches!(
        reason,
        Reason::Mentioned | Reason::Keyword(_) | Reason::AllMessages
    )
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Mentioned => f.write_str("mentioned"),
            Reason::Keyword(k) => write!(f, "keyword \"{k}\""),
            Reason::AllMessages => f.write_str("all_messages"),
            Reason::NotSubscribed => f.write_str("channel not subscribed"),
            Reason::NoMatch => f.write_str("no trigger matched"),
        }
    }
}

/// Why a persona wakes, in a batch answer: the keyword by its index in the persona's `keywords`
/// (checked to be in range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeReason {
    Mentioned,
    Keyword(u32),
    AllMessages,
}

impl WakeReason {
    /// The reason with the keyword named, as configured for `persona`.
    pub fn named(self, persona: &Persona) -> Reason {
        match self {
            WakeReason::Mentioned => Reason::Mentioned,
            WakeReason::AllMessages => Reason::AllMessages,
            WakeReason::Keyword(i) => Reason::Keyword(
                persona
                    .keywords
                    .get(i as usize)
                    .cloned()
                    .unwrap_or_default(),
            ),
        }
    }
}

/// One persona woken by one message of a [`TriggerRunner::decide_batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// Index into the batch's messages.
    pub message: u32,
    /// Index into the batch's personas.
    pub persona: u32,
    pub reason: WakeReason,
}

/// Stores a trigger runner keeps between calls: a matcher has no grants and sees every persona
/// anyway, so one key serves all calls; two cover a second thread.
const WARM_STORES: usize = 2;

/// Persona sets one store keeps (one per channel's personas in `apiary up`); past it, the set
/// made first is dropped, and made again when needed.
const SETS_PER_STORE: usize = 256;

/// The exports a runner calls, per release.
enum Calls {
    /// `decide` and `decide-batch`: the personas cross with every batch.
    V0_1 {
        decide: ComponentExportIndex,
        batch: ComponentExportIndex,
    },
    /// The `persona-set` constructor and its `decide`.
    V0_2 {
        new_set: ComponentExportIndex,
        decide: ComponentExportIndex,
    },
}

/// A loaded `trigger` component.
pub struct TriggerRunner {
    loaded: Arc<Loaded>,
    calls: Calls,
    limits: Limits,
    warm: WarmPool<()>,
    ids: SetIds,
}

impl TriggerRunner {
    pub fn new(loaded: Arc<Loaded>) -> Result<TriggerRunner, SandboxError> {
        let calls = match loaded.identity.release() {
            Release::V0_1 => {
                let [decide, batch] =
                    export_indexes(&loaded, World::Trigger, ["decide", "decide-batch"])?;
                Calls::V0_1 { decide, batch }
            }
            Release::V0_2 => {
                let [new_set, decide] = export_indexes(
                    &loaded,
                    World::Trigger,
                    ["[constructor]persona-set", "[method]persona-set.decide"],
                )?;
                Calls::V0_2 { new_set, decide }
            }
        };
        Ok(TriggerRunner {
            warm: loaded.warm_pool(WARM_STORES),
            loaded,
            calls,
            limits: Limits::trigger(),
            ids: SetIds::default(),
        })
    }

    pub fn with_limits(mut self, limits: Limits) -> TriggerRunner {
        self.limits = limits;
        self
    }

    pub fn loaded(&self) -> &Loaded {
        &self.loaded
    }

    /// The decision for one persona and one message. For a `0.2` matcher, a batch of one; the
    /// reasons for not waking are then the host's (not subscribed, or nothing matched).
    pub fn decide(
        &self,
        sandbox: &Sandbox,
        persona: &Persona,
        message: &Message,
    ) -> Result<CallOutput<Decision>, SandboxError> {
        let Calls::V0_1 { decide, .. } = &self.calls else {
            let out = self.decide_batch(
                sandbox,
                std::slice::from_ref(persona),
                std::slice::from_ref(message),
            )?;
            return Ok(out.map(|wakes| match wakes.first() {
                Some(w) => Decision {
                    wake: true,
                    reason: w.reason.named(persona),
                },
                None => Decision {
                    wake: false,
                    reason: asleep(persona, message),
                },
            }));
        };
        let name = self.loaded.name.clone();
        let max_string = self.limits.max_string;
        self.call(sandbox, |store, instance| {
            let f = instance
                .get_typed_func::<(&Persona, &Message), (Decision,)>(&mut *store, decide)?;
            let (decision,) = f.call(&mut *store, (persona, message))?;
            Ok(checked_decision(&name, decision, max_string))
        })
    }

    /// Every waking pair of `personas` × `messages`, in one call.
    pub fn decide_batch(
        &self,
        sandbox: &Sandbox,
        personas: &[Persona],
        messages: &[Message],
    ) -> Result<CallOutput<Vec<Wake>>, SandboxError> {
        let name = self.loaded.name.clone();
        let oversized = |size| SandboxError::Oversized {
            name: name.to_string(),
            what: "a batch's strings (bytes or count, past the WIT batch's 32-bit numbers)",
            size,
            limit: u32::MAX as usize,
        };
        let most = (personas.len() * messages.len()).min(self.limits.max_list);
        let check = |list: Vec<Wake>| {
            if list.len() > most {
                return Err(SandboxError::Oversized {
                    name: name.to_string(),
                    what: "a list of wakes (elements)",
                    size: list.len(),
                    limit: most,
                });
            }
            list.into_iter()
                .map(|w| checked_wake(&name, personas, messages.len(), w))
                .collect()
        };
        match &self.calls {
            Calls::V0_1 { batch, .. } => {
                let table = table::v0_1(personas, messages).map_err(oversized)?;
                self.call(sandbox, |store, instance| {
                    let f = instance.get_typed_func::<(&wit1::Batch,), (Vec<wit1::Wake>,)>(
                        &mut *store,
                        batch,
                    )?;
                    // Checked after the copy out of the guest (see `hook::guest_error`), which
                    // the guest's memory cap bounds.
                    let (list,) = f.call(&mut *store, (&table,))?;
                    Ok(check(list.into_iter().map(from_v0_1).collect()))
                })
            }
            Calls::V0_2 { new_set, decide } => {
                let table = table::v0_2(messages).map_err(oversized)?;
                let id = self.ids.id(personas);
                self.call(sandbox, |store, instance| {
                    let set = match store.data().sets.get(id) {
                        Some(set) => set,
                        None => {
                            let set = make_set(store, instance, new_set, personas)?;
                            if let Some(old) = store.data_mut().sets.keep(id, set, SETS_PER_STORE) {
                                old.resource_drop(&mut *store)?;
                            }
                            set
                        }
                    };
                    let f = instance
                        .get_typed_func::<(ResourceAny, &wit2::Batch), (Vec<wit2::Wake>,)>(
                            &mut *store,
                            decide,
                        )?;
                    let (list,) = f.call(&mut *store, (set, &table))?;
                    Ok(check(list.into_iter().map(from_v0_2).collect()))
                })
            }
        }
    }

    /// One call into the matcher, in its parked store: no filesystem grants, its own limits.
    fn call<R: Send>(
        &self,
        sandbox: &Sandbox,
        f: impl FnOnce(&mut Store<State>, &Instance) -> wasmtime::Result<Result<R, SandboxError>> + Send,
    ) -> Result<CallOutput<R>, SandboxError> {
        let grants = Grants::none();
        sandbox.call_warm(&self.loaded, &self.limits, &grants, &self.warm, (), f)
    }
}

/// A `persona-set` of `personas`, made in this instance.
fn make_set(
    store: &mut Store<State>,
    instance: &Instance,
    new_set: &ComponentExportIndex,
    personas: &[Persona],
) -> wasmtime::Result<ResourceAny> {
    let personas: Vec<wit2::Persona> = personas
        .iter()
        .map(|p| wit2::Persona {
            name: p.name.clone(),
            mentions: p.mentions,
            keywords: p.keywords.clone(),
            all_messages: p.all_messages,
            subscribe: p.subscribe.clone(),
        })
        .collect();
    let f = instance.get_typed_func::<(&[wit2::Persona],), (ResourceAny,)>(&mut *store, new_set)?;
    Ok(f.call(&mut *store, (&personas,))?.0)
}

/// Why `persona` stays asleep, as the host explains it: a channel it does not subscribe to, or
/// nothing matched.
fn asleep(persona: &Persona, message: &Message) -> Reason {
    let key = |c: &str| c.strip_prefix('#').unwrap_or(c).to_string();
    let channel = key(&message.channel);
    if persona.subscribe.iter().any(|c| key(c) == channel) {
        Reason::NoMatch
    } else {
        Reason::NotSubscribed
    }
}

fn from_v0_1(w: wit1::Wake) -> Wake {
    let reason = match w.reason {
        wit1::WakeReason::Mentioned => WakeReason::Mentioned,
        wit1::WakeReason::Keyword(i) => WakeReason::Keyword(i),
        wit1::WakeReason::AllMessages => WakeReason::AllMessages,
    };
    Wake {
        message: w.message,
        persona: w.persona,
        reason,
    }
}

fn from_v0_2(w: wit2::Wake) -> Wake {
    let reason = match w.reason {
        wit2::WakeReason::Mentioned => WakeReason::Mentioned,
        wit2::WakeReason::Keyword(i) => WakeReason::Keyword(i),
        wit2::WakeReason::AllMessages => WakeReason::AllMessages,
    };
    Wake {
        message: w.message,
        persona: w.persona,
        reason,
    }
}

/// A `0.1` decision, refused when its keyword is over the cap or it contradicts its reason.
fn checked_decision(name: &str, d: Decision, max: usize) -> Result<Decision, SandboxError> {
    if let Reason::Keyword(k) = &d.reason
        && k.len() > max
    {
        return Err(SandboxError::Oversized {
            name: name.to_string(),
            what: "a keyword reason",
            size: k.len(),
            limit: max,
        });
    }
    if d.wake != wakes(&d.reason) {
        return Err(SandboxError::Invalid {
            name: name.to_string(),
            detail: format!("wake={} contradicts its reason ({})", d.wake, d.reason),
        });
    }
    Ok(d)
}

/// A batch answer's wake, with its indexes checked (message, persona, keyword).
fn checked_wake(
    name: &str,
    personas: &[Persona],
    messages: usize,
    wake: Wake,
) -> Result<Wake, SandboxError> {
    let invalid = |detail: String| SandboxError::Invalid {
        name: name.to_string(),
        detail,
    };
    let persona = personas
        .get(wake.persona as usize)
        .filter(|_| (wake.message as usize) < messages)
        .ok_or_else(|| {
            invalid(format!(
                "wake for message {} / persona {} is out of range ({messages} messages, {} personas)",
                wake.message,
                wake.persona,
                personas.len()
            ))
        })?;
    if let WakeReason::Keyword(i) = wake.reason
        && i as usize >= persona.keywords.len()
    {
        return Err(invalid(format!(
            "keyword {i} of persona {} is out of range ({} keywords)",
            wake.persona,
            persona.keywords.len()
        )));
    }
    Ok(wake)
}

/// Ids for the distinct persona lists a runner was asked about, so a store can keep the set it
/// made for one. Lists are compared whole: a changed persona (a reload) is a new set.
#[derive(Default)]
struct SetIds {
    known: Mutex<Vec<(Vec<Persona>, u64)>>,
    next: std::sync::atomic::AtomicU64,
}

/// Lists a runner remembers; the oldest is forgotten first (its stores then make it anew).
const KNOWN_SETS: usize = 1024;

impl SetIds {
    fn id(&self, personas: &[Persona]) -> u64 {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = known.iter().rposition(|(p, _)| p == personas) {
            return known[at].1;
        }
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if known.len() >= KNOWN_SETS {
            known.remove(0);
        }
        known.push((personas.to_vec(), id));
        id
    }
}

/// The persona sets a store's instance made, by [`SetIds`] id, oldest first.
#[derive(Default)]
pub(crate) struct Sets(Vec<(u64, ResourceAny)>);

impl Sets {
    fn get(&self, id: u64) -> Option<ResourceAny> {
        self.0.iter().find(|(i, _)| *i == id).map(|(_, set)| *set)
    }

    /// Keeps `set`; past `most`, gives back the oldest, for the caller to drop in the guest.
    fn keep(&mut self, id: u64, set: ResourceAny, most: usize) -> Option<ResourceAny> {
        let old = (self.0.len() >= most).then(|| self.0.remove(0).1);
        self.0.push((id, set));
        old
    }
}
