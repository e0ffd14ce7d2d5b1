//! The embedded relay front's reading of a client message, on arbitrary text: any JSON array shape,
//! whitespace, escapes, sizes. Nothing may panic; what is accepted is within the size cap and reads
//! back the same after the front serialises it for the relay library (so the library serves what
//! the front screened); a refusal always has an answer that is itself a relay message.
#![no_main]

use apiary_relay::client_message::{Request, parse};
use libfuzzer_sys::fuzz_target;
use nostr_sdk::prelude::*;

/// Small enough that sizes around the cap are reached.
const MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text, MAX) {
        Ok(request) => {
            assert!(text.len() <= MAX);
            let again = request.to_json();
            assert_eq!(parse(&again, usize::MAX).as_ref(), Ok(&request), "{again}");
            let library = ClientMessage::from_json(&again).expect("the library reads it");
            assert_eq!(library.as_json(), again);
            if let Request::Event(ev) | Request::Auth(ev) = &request {
                let _ = ev.verify();
            }
        }
        Err(refused) => {
            let answer = refused.answer();
            RelayMessage::from_json(&answer).expect("the answer is a relay message");
        }
    }
});
