//! What a client may say to the embedded relay, read once: a websocket text message is parsed as
//! JSON and then held to the shapes of NIP-01 (`EVENT`, `REQ`, `CLOSE`), NIP-42 (`AUTH`) and
//! NIP-45 (`COUNT`), strictly: the exact number of elements, the exact fields of an event, only the
//! fields a filter has. Whatever else (another verb, an extra element, an unknown field, a message
//! over the size cap) is a [`Refused`], answered by the front and never passed on.
//!
//! The front decides on the parsed value, and the relay library is given that value serialised
//! again ([`Request::to_json`]), never the client's text: what was screened is what is served,
//! whatever whitespace, escapes or duplicate keys the client wrote.
//!
//! [`parse`] takes no socket and never panics, so the fuzz target calls it directly.

use std::borrow::Cow;

use nostr_relay_builder::prelude::*;
use serde_json::{Map, Value};

/// NIP-01: a subscription id is a non-empty string of at most 64 characters.
pub const MAX_SUBSCRIPTION_ID_CHARS: usize = 64;
/// Filters one `REQ` may carry (nostr clients send one or a few).
pub const MAX_FILTERS: usize = 16;

/// The fields of an event (NIP-01), no more, no fewer.
const EVENT_FIELDS: [&str; 7] = [
    "id",
    "pubkey",
    "created_at",
    "kind",
    "tags",
    "content",
    "sig",
];
/// The fields of a filter besides its `#<letter>` tag queries (NIP-01, NIP-50 `search`).
const FILTER_FIELDS: [&str; 7] = [
    "ids", "authors", "kinds", "since", "until", "limit", "search",
];

/// A client message the front understood.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Event(Box<Event>),
    Auth(Box<Event>),
    Req {
        id: SubscriptionId,
        filters: Vec<Filter>,
    },
    Count {
        id: SubscriptionId,
        filter: Filter,
    },
    Close(SubscriptionId),
}

impl Request {
    /// The message as the relay library is given it: serialised again from the parsed value.
    pub fn to_json(&self) -> String {
        let msg = match self {
            Request::Event(ev) => ClientMessage::Event(Cow::Borrowed(ev)),
            Request::Auth(ev) => ClientMessage::Auth(Cow::Borrowed(ev)),
            Request::Req { id, filters } => ClientMessage::Req {
                subscription_id: Cow::Borrowed(id),
                filters: filters.iter().map(Cow::Borrowed).collect(),
            },
            Request::Count { id, filter } => ClientMessage::Count {
                subscription_id: Cow::Borrowed(id),
                filter: Cow::Borrowed(filter),
            },
            Request::Close(id) => ClientMessage::Close(Cow::Borrowed(id)),
        };
        msg.as_json()
    }
}

/// Why a client message is refused, and whom the answer is about (an event's id gets an `OK
/// false`, a subscription a `CLOSED`, anything else a `NOTICE`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error("invalid: message is {bytes} bytes, over this relay's limit of {limit} bytes")]
    TooLarge {
        bytes: usize,
        limit: usize,
        about: About,
    },
    #[error("invalid: not JSON ({detail})")]
    NotJson { detail: String },
    #[error("invalid: a client message is a JSON array that starts with a string")]
    NotAMessage,
    #[error("unsupported: this relay does not serve `{verb}` messages")]
    UnknownVerb { verb: String },
    #[error("invalid: {verb} takes {expected} elements, not {got}")]
    Shape {
        verb: &'static str,
        expected: &'static str,
        got: usize,
        about: About,
    },
    #[error(
        "invalid: a subscription id is a string of 1 to {MAX_SUBSCRIPTION_ID_CHARS} characters"
    )]
    SubscriptionId,
    #[error("invalid: event: {detail}")]
    Event { detail: String, about: About },
    #[error("invalid: filter: {detail}")]
    Filter { detail: String, about: About },
}

/// What a refusal is about, as far as the message said before it went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum About {
    Nothing,
    Event(EventId),
    Subscription(SubscriptionId),
}

impl Refused {
    fn about(&self) -> &About {
        match self {
            Refused::TooLarge { about, .. }
            | Refused::Shape { about, .. }
            | Refused::Event { about, .. }
            | Refused::Filter { about, .. } => about,
            _ => &About::Nothing,
        }
    }

    /// The relay's answer: `OK false` for an event, `CLOSED` for a subscription, else `NOTICE`.
    pub fn answer(&self) -> String {
        let why = Cow::Owned(self.to_string());
        let msg = match self.about() {
            About::Event(id) => RelayMessage::Ok {
                event_id: *id,
                status: false,
                message: why,
            },
            About::Subscription(id) => RelayMessage::Closed {
                subscription_id: Cow::Borrowed(id),
                message: why,
            },
            About::Nothing => RelayMessage::Notice(why),
        };
        msg.as_json()
    }
}

/// Parses one client message; `max_bytes` caps every message, whatever its verb.
pub fn parse(text: &str, max_bytes: usize) -> Result<Request, Refused> {
    let value: Value = serde_json::from_str(text).map_err(|e| Refused::NotJson {
        detail: e.to_string(),
    })?;
    let Value::Array(items) = value else {
        return Err(Refused::NotAMessage);
    };
    let Some(Value::String(verb)) = items.first() else {
        return Err(Refused::NotAMessage);
    };
    let request = match verb.as_str() {
        "EVENT" => Request::Event(event_message("EVENT", &items)?),
        "AUTH" => Request::Auth(event_message("AUTH", &items)?),
        "REQ" => req(&items)?,
        "COUNT" => count(&items)?,
        "CLOSE" => close(&items)?,
        other => {
            return Err(Refused::UnknownVerb {
                verb: other.chars().take(32).collect(),
            });
        }
    };
    if text.len() > max_bytes {
        return Err(Refused::TooLarge {
            bytes: text.len(),
            limit: max_bytes,
            about: about_request(&request),
        });
    }
    Ok(request)
}

/// Whom an over-sized (but otherwise valid) message is about.
fn about_request(request: &Request) -> About {
    match request {
        Request::Event(ev) | Request::Auth(ev) => About::Event(ev.id),
        Request::Req { id, .. } | Request::Count { id, .. } => About::Subscription(id.clone()),
        Request::Close(_) => About::Nothing,
    }
}

/// `["EVENT", <event>]` or `["AUTH", <event>]`.
fn event_message(verb: &'static str, items: &[Value]) -> Result<Box<Event>, Refused> {
    let about = items.get(1).map(claimed_id).unwrap_or(About::Nothing);
    if items.len() != 2 {
        return Err(Refused::Shape {
            verb,
            expected: "2",
            got: items.len(),
            about,
        });
    }
    event(&items[1]).map_err(|detail| Refused::Event { detail, about })
}

/// The id an event object claims (for the `OK false` that refuses it), if it is one.
fn claimed_id(value: &Value) -> About {
    value
        .get("id")
        .and_then(Value::as_str)
        .and_then(|id| EventId::from_hex(id).ok())
        .map_or(About::Nothing, About::Event)
}

fn event(value: &Value) -> Result<Box<Event>, String> {
    let Value::Object(fields) = value else {
        return Err("not a JSON object".to_string());
    };
    exact_fields(fields)?;
    serde_json::from_value(value.clone())
        .map(Box::new)
        .map_err(|e| e.to_string())
}

/// An event has exactly the NIP-01 fields: none missing, none unknown.
fn exact_fields(fields: &Map<String, Value>) -> Result<(), String> {
    if let Some(extra) = fields.keys().find(|k| !EVENT_FIELDS.contains(&k.as_str())) {
        return Err(format!("unknown field `{}`", clip(extra)));
    }
    match EVENT_FIELDS.iter().find(|f| !fields.contains_key(**f)) {
        Some(missing) => Err(format!("missing field `{missing}`")),
        None => Ok(()),
    }
}

/// `["REQ", <id>, <filter>, ...]` with 1 to [`MAX_FILTERS`] filters.
fn req(items: &[Value]) -> Result<Request, Refused> {
    let id = subscription_id(items.get(1))?;
    let filters = &items[2.min(items.len())..];
    if filters.is_empty() || filters.len() > MAX_FILTERS {
        return Err(Refused::Shape {
            verb: "REQ",
            expected: "3 to 18",
            got: items.len(),
            about: About::Subscription(id),
        });
    }
    let filters = filters
        .iter()
        .map(|f| filter(f, &id))
        .collect::<Result<_, _>>()?;
    Ok(Request::Req { id, filters })
}

/// `["COUNT", <id>, <filter>]`: one filter (the library would count by the first of several).
fn count(items: &[Value]) -> Result<Request, Refused> {
    let id = subscription_id(items.get(1))?;
    if items.len() != 3 {
        return Err(Refused::Shape {
            verb: "COUNT",
            expected: "3",
            got: items.len(),
            about: About::Subscription(id),
        });
    }
    let filter = filter(&items[2], &id)?;
    Ok(Request::Count { id, filter })
}

/// `["CLOSE", <id>]`.
fn close(items: &[Value]) -> Result<Request, Refused> {
    let id = subscription_id(items.get(1))?;
    if items.len() != 2 {
        return Err(Refused::Shape {
            verb: "CLOSE",
            expected: "2",
            got: items.len(),
            about: About::Nothing,
        });
    }
    Ok(Request::Close(id))
}

fn subscription_id(value: Option<&Value>) -> Result<SubscriptionId, Refused> {
    match value {
        Some(Value::String(id))
            if !id.is_empty() && id.chars().count() <= MAX_SUBSCRIPTION_ID_CHARS =>
        {
            Ok(SubscriptionId::new(id.as_str()))
        }
        _ => Err(Refused::SubscriptionId),
    }
}

/// A filter with only the fields a filter has (`#` and one ASCII letter for a tag query).
fn filter(value: &Value, id: &SubscriptionId) -> Result<Filter, Refused> {
    let refuse = |detail: String| Refused::Filter {
        detail,
        about: About::Subscription(id.clone()),
    };
    let Value::Object(fields) = value else {
        return Err(refuse("not a JSON object".to_string()));
    };
    if let Some(unknown) = fields.keys().find(|k| !is_filter_field(k)) {
        return Err(refuse(format!("unknown field `{}`", clip(unknown))));
    }
    serde_json::from_value(value.clone()).map_err(|e| refuse(e.to_string()))
}

fn is_filter_field(key: &str) -> bool {
    if FILTER_FIELDS.contains(&key) {
        return true;
    }
    let mut chars = key.chars();
    matches!(
        (chars.next(), chars.next(), chars.next()),
        (Some('#'), Some(c), None) if c.is_ascii_alphabetic()
    )
}

/// A client's string, cut short for an error message.
fn clip(s: &str) -> String {
    s.chars().take(32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 64 * 1024;

    fn event_json() -> (Event, Value) {
        let ev = crate::message(&Keys::generate(), "general", "hi", vec![]).unwrap();
        let v = serde_json::from_str(&ev.as_json()).unwrap();
        (ev, v)
    }

    #[test]
    fn whitespace_and_escapes_are_read_as_json_reads_them() {
        let (ev, v) = event_json();
        let spaced = format!("[ \n\t \"EVENT\" , {v} ]");
        assert_eq!(
            parse(&spaced, MAX),
            Ok(Request::Event(Box::new(ev.clone())))
        );
        let escaped = format!("[\"\\u0045VENT\",{v}]");
        assert_eq!(
            parse(&escaped, MAX),
            Ok(Request::Event(Box::new(ev.clone())))
        );
        let auth = format!("[\"\\u0041UTH\",{v}]");
        assert!(matches!(parse(&auth, MAX), Ok(Request::Auth(_))));
        // What the library is given is the parsed value, in canonical form.
        let again = parse(&spaced, MAX).unwrap().to_json();
        assert_eq!(again, ClientMessage::event(ev).as_json());
    }

    #[test]
    fn the_size_cap_holds_for_every_verb() {
        let (ev, v) = event_json();
        let padded = format!("[\"EVENT\",{v}{}]", " ".repeat(MAX));
        let refused = parse(&padded, MAX).unwrap_err();
        assert!(matches!(refused, Refused::TooLarge { .. }), "{refused:?}");
        assert!(refused.answer().contains(&ev.id.to_hex()));
        let search = "x".repeat(MAX);
        let count = format!("[\"COUNT\",\"c\",{{\"search\":\"{search}\"}}]");
        let refused = parse(&count, MAX).unwrap_err();
        assert!(
            refused.answer().starts_with("[\"CLOSED\",\"c\""),
            "{}",
            refused.answer()
        );
        let close = format!("[\"CLOSE\",\"c\"{}]", " ".repeat(MAX));
        assert!(
            parse(&close, MAX)
                .unwrap_err()
                .answer()
                .starts_with("[\"NOTICE\"")
        );
    }

    #[test]
    fn shapes_the_library_would_read_differently_are_refused() {
        let (_, v) = event_json();
        let f = r#"{"kinds":[9]}"#;
        for bad in [
            format!("[\"EVENT\",{v},1]"),
            format!("[\"AUTH\",{v},{v}]"),
            format!("[\"COUNT\",\"c\",{f},{f}]"),
            "[\"CLOSE\",\"c\",\"d\"]".to_string(),
            "[\"REQ\",\"c\"]".to_string(),
            format!("[\"REQ\",\"\",{f}]"),
            format!("[\"REQ\",{},{f}]", serde_json::json!("x".repeat(65))),
            format!("[\"REQ\",7,{f}]"),
            "[\"REQ\",\"c\",{\"kinds\":[9],\"hashtags\":[\"x\"]}]".to_string(),
            "[\"REQ\",\"c\",{\"#hh\":[\"x\"]}]".to_string(),
            "[\"REQ\",\"c\",[]]".to_string(),
            "[\"NEG-OPEN\",\"c\",{},\"00\"]".to_string(),
            "[\"event\",{}]".to_string(),
            "[]".to_string(),
            "[1]".to_string(),
            "{\"EVENT\":1}".to_string(),
            "\"EVENT\"".to_string(),
            "not json".to_string(),
            String::new(),
        ] {
            assert!(parse(&bad, MAX).is_err(), "accepted: {bad}");
        }
        let mut extra = v.clone();
        extra["relay_note"] = "x".into();
        let refused = parse(&format!("[\"EVENT\",{extra}]"), MAX).unwrap_err();
        assert!(refused.to_string().contains("unknown field"), "{refused}");
        let mut missing = v.clone();
        missing.as_object_mut().unwrap().remove("sig");
        assert!(parse(&format!("[\"EVENT\",{missing}]"), MAX).is_err());
    }

    #[test]
    fn what_clients_send_is_understood() {
        let f = r##"{"kinds":[9],"#h":["general"],"since":1,"limit":5,"search":"deploy"}"##;
        match parse(&format!("[\"REQ\",\"s1\",{f},{{\"ids\":[]}}]"), MAX) {
            Ok(Request::Req { id, filters }) => {
                assert_eq!(id.as_str(), "s1");
                assert_eq!(filters.len(), 2);
                assert_eq!(filters[0].search.as_deref(), Some("deploy"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&format!("[\"COUNT\",\"c\",{f}]"), MAX),
            Ok(Request::Count { .. })
        ));
        assert!(matches!(
            parse("[\"CLOSE\",\"c\"]", MAX),
            Ok(Request::Close(_))
        ));
    }
}
