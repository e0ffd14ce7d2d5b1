//! Trigger front end: which messages wake which persona, decided by a `trigger` component —
//! by default the built-in `trigger-default` (embedded in the binary), which implements the spec's
//! semantics. A matcher's failure (trap, deadline, invalid answer) means "do not wake".

use std::sync::Arc;

use wasmtime::component::ComponentExportIndex;

use super::bindings::latest::trigger::exports::apiary::plugin::matcher as wit;
use super::hook::export_indexes;
use super::warm::WarmPool;
use super::{CallOutput, Grants, Limits, Loaded, Sandbox, SandboxError, World};
pub use wit::{Decision, Message, Persona, Reason};

/// The `trigger-default` component, built from `guests/trigger-default` by build.rs.
pub const DEFAULT_WASM: &[u8] = include_bytes!(env!("APIARY_TRIGGER_DEFAULT_WASM"));

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

/// One persona woken by one message of a [`TriggerRunner::decide_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// Index into the batch's messages.
    pub message: u32,
    /// Index into the batch's personas.
    pub persona: u32,
    /// A waking reason (mentioned, keyword or all_messages).
    pub reason: Reason,
}

/// Stores a trigger runner keeps between calls: a matcher has no grants and sees every persona
/// anyway, so one key serves all calls; two cover a second thread.
const WARM_STORES: usize = 2;

/// A loaded `trigger` component.
pub struct TriggerRunner {
    loaded: Arc<Loaded>,
    exports: [ComponentExportIndex; 2],
    limits: Limits,
    warm: WarmPool<()>,
}

impl TriggerRunner {
    /// The built-in matcher.
    pub fn builtin(sandbox: &Sandbox) -> Result<TriggerRunner, SandboxError> {
        TriggerRunner::new(sandbox.load(DEFAULT_NAME, DEFAULT_WASM)?)
    }

    pub fn new(loaded: Arc<Loaded>) -> Result<TriggerRunner, SandboxError> {
        let exports = export_indexes(&loaded, World::Trigger, ["decide", "decide-batch"])?;
        Ok(TriggerRunner {
            warm: loaded.warm_pool(WARM_STORES),
            loaded,
            exports,
            limits: Limits::trigger(),
        })
    }

    pub fn with_limits(mut self, limits: Limits) -> TriggerRunner {
        self.limits = limits;
        self
    }

    pub fn loaded(&self) -> &Loaded {
        &self.loaded
    }

    /// The decision for one persona and one message.
    pub fn decide(
        &self,
        sandbox: &Sandbox,
        persona: &Persona,
        message: &Message,
    ) -> Result<CallOutput<Decision>, SandboxError> {
        let name = self.loaded.name.clone();
        let max_string = self.limits.max_string;
        let grants = Grants::none();
        sandbox.call_warm(
            &self.loaded,
            &self.limits,
            &grants,
            &self.warm,
            (),
            |store, instance| {
                let f = instance.get_typed_func::<(&Persona, &Message), (Decision,)>(
                    &mut *store,
                    &self.exports[0],
                )?;
                let (decision,) = f.call(&mut *store, (persona, message))?;
                Ok(
                    check_reason(&name, &decision.reason, max_string).and_then(|()| {
                        if decision.wake == wakes(&decision.reason) {
                            Ok(decision)
                        } else {
                            Err(SandboxError::Invalid {
                                name: name.to_string(),
                                detail: format!(
                                    "wake={} contradicts its reason ({})",
                                    decision.wake, decision.reason
                                ),
                            })
                        }
                    }),
                )
            },
        )
    }

    /// Every waking pair of `personas` × `messages`, in one call (as the WIT `batch` table).
    pub fn decide_batch(
        &self,
        sandbox: &Sandbox,
        personas: &[Persona],
        messages: &[Message],
    ) -> Result<CallOutput<Vec<Wake>>, SandboxError> {
        let name = self.loaded.name.clone();
        let limits = self.limits.clone();
        let batch = pack(personas, messages).map_err(|size| SandboxError::Oversized {
            name: name.to_string(),
            what: "a batch's strings (bytes, for the 32-bit offsets of the WIT batch)",
            size,
            limit: u32::MAX as usize,
        })?;
        let grants = Grants::none();
        sandbox.call_warm(
            &self.loaded,
            &self.limits,
            &grants,
            &self.warm,
            (),
            |store, instance| {
                let f = instance.get_typed_func::<(&wit::Batch,), (Vec<wit::Wake>,)>(
                    &mut *store,
                    &self.exports[1],
                )?;
                let (list,) = f.call(&mut *store, (&batch,))?;
                // Checked after the copy out of the guest (see `hook::guest_error`), which the guest's
                // memory cap bounds.
                let most = (personas.len() * messages.len()).min(limits.max_list);
                if list.len() > most {
                    return Ok(Err(SandboxError::Oversized {
                        name: name.to_string(),
                        what: "a list of wakes (elements)",
                        size: list.len(),
                        limit: most,
                    }));
                }
                Ok(list
                    .into_iter()
                    .map(|wake| checked_wake(&name, personas, messages.len(), wake))
                    .collect())
            },
        )
    }
}

/// A batch answer's wake, with its indexes checked and its keyword index turned into the keyword.
fn checked_wake(
    name: &str,
    personas: &[Persona],
    messages: usize,
    wake: wit::Wake,
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
    let reason = match wake.reason {
        wit::WakeReason::Mentioned => Reason::Mentioned,
        wit::WakeReason::AllMessages => Reason::AllMessages,
        wit::WakeReason::Keyword(i) => match persona.keywords.get(i as usize) {
            Some(k) => Reason::Keyword(k.clone()),
            None => {
                return Err(invalid(format!(
                    "keyword {i} of persona {} is out of range ({} keywords)",
                    wake.persona,
                    persona.keywords.len()
                )));
            }
        },
    };
    Ok(Wake {
        message: wake.message,
        persona: wake.persona,
        reason,
    })
}

/// Lays `personas` and `messages` out as the WIT `batch` string table. Fails with the size reached
/// when the strings do not fit its 32-bit offsets.
fn pack(personas: &[Persona], messages: &[Message]) -> Result<wit::Batch, usize> {
    let mut table = Table::default();
    let personas = personas
        .iter()
        .map(|p| {
            Ok(wit::BatchPersona {
                name: table.span(&p.name)?,
                mentions: p.mentions,
                keywords: table.run(&p.keywords)?,
                all_messages: p.all_messages,
                subscribe: table.run(&p.subscribe)?,
            })
        })
        .collect::<Result<Vec<_>, usize>>()?;
    let messages = messages
        .iter()
        .map(|m| {
            Ok(wit::BatchMessage {
                id: table.span(&m.id)?,
                channel: table.span(&m.channel)?,
                author: table.span(&m.author)?,
                text: table.span(&m.text)?,
                mentions: table.run(&m.mentions)?,
            })
        })
        .collect::<Result<Vec<_>, usize>>()?;
    Ok(wit::Batch {
        text: table.text,
        spans: table.spans,
        personas,
        messages,
    })
}

/// The string table of a batch being packed.
#[derive(Default)]
struct Table {
    text: String,
    spans: Vec<wit::Span>,
}

impl Table {
    /// Fails with the text's size if `s` would end past 4 GiB.
    fn span(&mut self, s: &str) -> Result<wit::Span, usize> {
        let end = self.text.len().saturating_add(s.len());
        if u32::try_from(end).is_err() {
            return Err(end);
        }
        let span = wit::Span {
            start: self.text.len() as u32,
            len: s.len() as u32,
        };
        self.text.push_str(s);
        Ok(span)
    }

    /// Fails with the text's size, or the number of spans, past 32 bits.
    fn run(&mut self, items: &[String]) -> Result<wit::Run, usize> {
        let start = self.spans.len();
        for item in items {
            let span = self.span(item)?;
            self.spans.push(span);
        }
        let fits = |n: usize| u32::try_from(n).map_err(|_| n);
        Ok(wit::Run {
            start: fits(start)?,
            len: fits(items.len())?,
        })
    }
}

fn check_reason(name: &str, reason: &Reason, max: usize) -> Result<(), SandboxError> {
    match reason {
        Reason::Keyword(k) if k.len() > max => Err(SandboxError::Oversized {
            name: name.to_string(),
            what: "a keyword reason",
            size: k.len(),
            limit: max,
        }),
        _ => Ok(()),
    }
}
