//! The `hook` world: code run at three points of a persona's life.
//!
//! The host applies the failure policy: an `on_start` error aborts that persona's start, an
//! `on_stop` error is only logged, an `on_message` error drops the message (the agent never sees
//! it). The persona's workspace is preopened read-write at `/workspace` (`std::fs` works there).

/// Who a hook runs for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Persona {
    /// The pack's `id` from `.plugin/plugin.json`.
    pub pack_id: String,
    /// The persona's `name`.
    pub name: String,
}

/// One relay message on its way to a persona's agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// The relay's id for the message (a Nostr event id, hex).
    pub id: String,
    /// The channel, without a leading `#`.
    pub channel: String,
    /// The thread's root message id, when the message is a thread reply.
    pub thread: Option<String>,
    /// The author's public key, hex.
    pub author: String,
    /// The author's display name, when the host knows one.
    pub author_name: Option<String>,
    /// The message text.
    pub text: String,
}

/// Everything `on_message` is told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageContext {
    pub persona: Persona,
    pub message: Message,
}

/// A lifecycle hook. Every method defaults to doing nothing and succeeding; implement the ones
/// you need. Keep error strings short: the operator reads them.
pub trait Hook {
    /// Before the persona's agent session starts; an error aborts the start.
    fn on_start(persona: Persona) -> Result<(), String> {
        let _ = persona;
        Ok(())
    }

    /// After the persona's agent session ends; an error is logged.
    fn on_stop(persona: Persona) -> Result<(), String> {
        let _ = persona;
        Ok(())
    }

    /// Before each message is dispatched to the agent; an error drops the message.
    fn on_message(context: MessageContext) -> Result<(), String> {
        let _ = context;
        Ok(())
    }
}

/// Used by the export macro: a clear error when the type does not implement [`Hook`].
#[doc(hidden)]
pub fn __assert_hook<T: Hook>() {}
