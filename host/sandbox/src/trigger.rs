//! Trigger front end: which messages wake which persona, decided by a `trigger` component —
//! by default the built-in `trigger-default` (embedded in the binary), which implements the spec's
//! semantics. A matcher's failure (trap, deadline, invalid answer) means "do not wake".

use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Instance};

use super::bindings::latest::trigger::exports::apiary::plugin::matcher as wit;
use super::hook::export_indexes;
use super::warm::WarmPool;
use super::{CallOutput, Grants, Limits, Loaded, Sandbox, SandboxError, State, World};
pub use wit::{Decision, Message, Persona, Reason};

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
        self.call(sandbox, |store, instance| {
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
        })
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
            what: "a batch's strings (bytes or count, past the WIT batch's 32-bit numbers)",
            size,
            limit: u32::MAX as usize,
        })?;
        self.call(sandbox, |store, instance| {
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
        })
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
/// when the strings do not fit its 32-bit numbers.
fn pack(personas: &[Persona], messages: &[Message]) -> Result<wit::Batch, usize> {
    let mut table = Table::with_capacity(personas, messages);
    let personas = personas
        .iter()
        .map(|p| {
            Ok(wit::BatchPersona {
                name: table.push(&p.name)?,
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
            let strings = table.push(&m.id)?;
            for s in [&m.channel, &m.author, &m.text] {
                table.push(s)?;
            }
            Ok(wit::BatchMessage {
                strings,
                mentions: table.run(&m.mentions)?.len,
            })
        })
        .collect::<Result<Vec<_>, usize>>()?;
    Ok(wit::Batch {
        text: table.text,
        ends: table.ends,
        personas,
        messages,
    })
}

/// The string table of a batch being packed.
struct Table {
    text: String,
    ends: Vec<u32>,
}

impl Table {
    /// Sized for every string of the batch, so packing copies each string once.
    fn with_capacity(personas: &[Persona], messages: &[Message]) -> Table {
        let strings = |list: &[String]| list.iter().map(String::len).sum::<usize>();
        let (mut bytes, mut count) = (0, 0);
        for p in personas {
            bytes += p.name.len() + strings(&p.keywords) + strings(&p.subscribe);
            count += 1 + p.keywords.len() + p.subscribe.len();
        }
        for m in messages {
            bytes += m.id.len() + m.channel.len() + m.author.len() + m.text.len();
            bytes += strings(&m.mentions);
            count += 4 + m.mentions.len();
        }
        Table {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(count),
        }
    }

    /// Appends `s`, returning its number. Fails with the text's size if `s` would end past 4 GiB,
    /// or with the number of strings past 32 bits.
    fn push(&mut self, s: &str) -> Result<u32, usize> {
        let number = u32::try_from(self.ends.len()).map_err(|_| self.ends.len())?;
        let end = self.text.len().saturating_add(s.len());
        let end = u32::try_from(end).map_err(|_| end)?;
        self.text.push_str(s);
        self.ends.push(end);
        Ok(number)
    }

    fn run(&mut self, items: &[String]) -> Result<wit::Run, usize> {
        let start = u32::try_from(self.ends.len()).map_err(|_| self.ends.len())?;
        for item in items {
            self.push(item)?;
        }
        let len = u32::try_from(items.len()).map_err(|_| items.len())?;
        Ok(wit::Run { start, len })
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
