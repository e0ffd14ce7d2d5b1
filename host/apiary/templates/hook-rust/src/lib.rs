//! {{name}}: an apiary hook. apiary calls it at a persona's start and stop and before each message
//! reaches the persona's agent; an error from `on_message` drops the message.
//!
//! This one drops empty messages and messages containing "spam" (any case), and logs the others'
//! authors through the host. The persona's workspace is at /workspace (read-write) if you need it.

use apiary_guest_sdk::hook::{Hook, MessageContext, Persona};
use apiary_guest_sdk::log;

pub struct Component;

impl Hook for Component {
    fn on_start(persona: Persona) -> Result<(), String> {
        log::info(&format!("started for {}/{}", persona.pack_id, persona.name));
        Ok(())
    }

    fn on_message(context: MessageContext) -> Result<(), String> {
        let text = context.message.text.trim();
        if text.is_empty() {
            return Err("empty message".into());
        }
        if text.to_lowercase().contains("spam") {
            return Err("looks like spam".into());
        }
        log::debug(&format!("keeping a message from {}", context.message.author));
        Ok(())
    }
}

apiary_guest_sdk::export_hook!(Component);

#[cfg(test)]
mod tests {
    use super::*;
    use apiary_guest_sdk::hook::Message;

    fn says(text: &str) -> MessageContext {
        MessageContext {
            message: Message {
                text: text.into(),
                ..Message::default()
            },
            ..MessageContext::default()
        }
    }

    #[test]
    fn drops_spam_and_empty_messages() {
        assert!(Component::on_message(says("hello")).is_ok());
        assert!(Component::on_message(says("Cheap SPAM here")).is_err());
        assert!(Component::on_message(says("   ")).is_err());
    }
}
