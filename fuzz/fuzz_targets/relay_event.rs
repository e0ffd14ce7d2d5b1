//! Relay input on arbitrary bytes: a frame as a relay sends it (`["EVENT", sub, {...}]`) or a bare
//! event, parsed and, when it is one, turned into a chat message. Nothing may panic, and a message
//! the harness accepts respects its caps.
#![no_main]

use apiary_relay::{MAX_CONTENT, Message};
use libfuzzer_sys::fuzz_target;
use nostr_sdk::prelude::*;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let event = match RelayMessage::from_json(text) {
        Ok(RelayMessage::Event { event, .. }) => event.into_owned(),
        _ => match Event::from_json(text) {
            Ok(event) => event,
            Err(_) => return,
        },
    };
    // Hostile events reach the parser before (and without) signature checks in some paths.
    let _ = event.verify();
    if let Some(message) = Message::parse(&event) {
        assert!(message.content.len() <= MAX_CONTENT);
        assert!(!message.channel.is_empty() && message.channel.chars().count() <= 256);
    }
});
