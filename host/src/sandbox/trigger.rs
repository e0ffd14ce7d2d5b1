//! Trigger front end: which messages wake which persona, decided by a `trigger` component —
//! by default the built-in `trigger-default` (embedded in the binary), which implements the spec's
//! semantics. A matcher's failure (trap, deadline, invalid answer) means "do not wake".

use std::sync::Arc;

use wasmtime::component::ComponentExportIndex;

pub use super::bindings::latest::trigger::exports::apiary::plugin::matcher::{
    Decision, Message, Persona, Reason, Wake,
};
use super::hook::export_indexes;
use super::warm::WarmPool;
use super::{CallOutput, Grants, Limits, Loaded, Sandbox, SandboxError, World};

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

    /// Every waking pair of `personas` × `messages`, in one call.
    pub fn decide_batch(
        &self,
        sandbox: &Sandbox,
        personas: &[Persona],
        messages: &[Message],
    ) -> Result<CallOutput<Vec<Wake>>, SandboxError> {
        let name = self.loaded.name.clone();
        let limits = self.limits.clone();
        let grants = Grants::none();
        sandbox.call_warm(&self.loaded, &self.limits, &grants, &self.warm, (), |store, instance| {
            let f = instance
                .get_typed_func::<(&[Persona], &[Message]), (Vec<Wake>,)>(&mut *store, &self.exports[1])?;
            let (list,) = f.call(&mut *store, (personas, messages))?;
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
            let mut wakes_out = Vec::with_capacity(list.len());
            for wake in list {
                if wake.message as usize >= messages.len() || wake.persona as usize >= personas.len() {
                    return Ok(Err(SandboxError::Invalid {
                        name: name.to_string(),
                        detail: format!(
                            "wake for message {} / persona {} is out of range ({} messages, {} personas)",
                            wake.message,
                            wake.persona,
                            messages.len(),
                            personas.len()
                        ),
                    }));
                }
                if let Err(e) = check_reason(&name, &wake.reason, limits.max_string) {
                    return Ok(Err(e));
                }
                if !wakes(&wake.reason) {
                    return Ok(Err(SandboxError::Invalid {
                        name: name.to_string(),
                        detail: format!("a batch wake carries a non-waking reason ({})", wake.reason),
                    }));
                }
                wakes_out.push(wake);
            }
            Ok(Ok(wakes_out))
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
