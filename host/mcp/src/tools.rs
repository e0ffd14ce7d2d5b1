//! The tools, their input schemas, and the checks every input passes before a backend sees it:
//! known fields only, typed, bounded, ids that are ids. What comes out is a [`ToolCall`].

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A message's text a post may carry.
pub const POST_MAX: usize = 16 * 1024;
/// A search's text.
pub const SEARCH_MAX: usize = 256;
/// A channel name or id, an author.
const NAME_MAX: usize = 128;
/// Messages one read returns at most, and by default.
pub const LIMIT_MAX: usize = 100;
const LIMIT_DEFAULT: usize = 20;

/// A checked call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCall {
    /// The thread of `thread` (a message id), or of the message being answered.
    ReadThread {
        thread: Option<String>,
        limit: usize,
    },
    /// A channel's messages, newest last.
    ReadChannel {
        channel: Option<String>,
        since: Option<u64>,
        limit: usize,
    },
    /// A channel's messages matching all that is given.
    Search {
        channel: Option<String>,
        text: Option<String>,
        author: Option<String>,
        since: Option<u64>,
        until: Option<u64>,
        limit: usize,
    },
    /// A message by the persona, in a channel it subscribes to (and a thread of it).
    Post {
        channel: Option<String>,
        thread: Option<String>,
        text: String,
    },
    /// The personas this one may hand work to.
    ListPersonas,
}

/// A refusal the model reads (a tool error, not a protocol error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(why: impl Into<String>) -> ToolError {
        ToolError(why.into())
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadThread {
    /// Id (64 hex digits) of the thread's root or of any message in it. Default: the thread of
    /// the message you are answering.
    thread: Option<String>,
    /// At most this many messages, the most recent (1-100, default 20).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadChannel {
    /// A channel you subscribe to, by name (`general`). Default: the channel of this conversation.
    channel: Option<String>,
    /// Only messages at or after this time (Unix seconds).
    since: Option<u64>,
    /// At most this many messages, the most recent (1-100, default 20).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Search {
    /// A channel you subscribe to, by name. Default: the channel of this conversation.
    channel: Option<String>,
    /// Words the message contains (case-insensitive).
    text: Option<String>,
    /// The author: a display name, a persona name, an npub or a hex public key.
    author: Option<String>,
    /// Only messages at or after this time (Unix seconds).
    since: Option<u64>,
    /// Only messages at or before this time (Unix seconds).
    until: Option<u64>,
    /// At most this many matches, the most recent (1-100, default 20).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Post {
    /// A channel you subscribe to, by name. Default: the channel of this conversation.
    channel: Option<String>,
    /// Id of a thread's root message to post in (64 hex digits); without it the post starts a
    /// thread of its own.
    thread: Option<String>,
    /// The message. Mention a persona with `@name` to hand it work.
    text: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListPersonas {}

/// One tool as `tools/list` shows it.
pub struct Spec {
    pub name: &'static str,
    pub description: &'static str,
    pub read_only: bool,
    pub schema: fn() -> Value,
}

fn schema<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).expect("a schema serialises")
}

pub const TOOLS: &[Spec] = &[
    Spec {
        name: "read_thread",
        description: "Read the thread you are answering (or the thread of a message id): its root first, then its replies in order, each with its author's name and whether a persona of this harness wrote it.",
        read_only: true,
        schema: schema::<ReadThread>,
    },
    Spec {
        name: "read_channel",
        description: "Read a channel's recent messages, oldest first, from a channel you subscribe to.",
        read_only: true,
        schema: schema::<ReadChannel>,
    },
    Spec {
        name: "search_channel",
        description: "Search a channel you subscribe to by words, author and time range; the most recent matches, oldest first.",
        read_only: true,
        schema: schema::<Search>,
    },
    Spec {
        name: "post",
        description: "Post a message as yourself to a channel you subscribe to, or into one of its threads. apiary signs it; it counts against your turn limits. Mention another persona with @name to hand it a task: its answer comes in the thread.",
        read_only: false,
        schema: schema::<Post>,
    },
    Spec {
        name: "list_personas",
        description: "List the personas you can hand work to (mention them with @name): name, pack, description and channels.",
        read_only: true,
        schema: schema::<ListPersonas>,
    },
];

/// `tools/list`'s tools, as the SDK models them.
pub fn listed() -> Vec<rmcp::model::Tool> {
    TOOLS
        .iter()
        .map(|s| {
            let Value::Object(schema) = (s.schema)() else {
                unreachable!("an object schema")
            };
            let mut tool = rmcp::model::Tool::new(s.name, s.description, Arc::new(schema));
            tool.annotations = Some(
                rmcp::model::ToolAnnotations::new()
                    .read_only(s.read_only)
                    .destructive(false)
                    .open_world(false),
            );
            tool
        })
        .collect()
}

/// Checks a call's name and arguments; `Ok(None)`: no such tool.
pub fn parse(name: &str, args: Option<Map<String, Value>>) -> Result<Option<ToolCall>, ToolError> {
    let args = Value::Object(args.unwrap_or_default());
    let call = match name {
        "read_thread" => {
            let a: ReadThread = input(name, args)?;
            ToolCall::ReadThread {
                thread: a.thread.map(|t| event_id("thread", &t)).transpose()?,
                limit: limit(a.limit)?,
            }
        }
        "read_channel" => {
            let a: ReadChannel = input(name, args)?;
            ToolCall::ReadChannel {
                channel: channel(a.channel)?,
                since: a.since,
                limit: limit(a.limit)?,
            }
        }
        "search_channel" => {
            let a: Search = input(name, args)?;
            if let (Some(s), Some(u)) = (a.since, a.until)
                && s > u
            {
                return Err(ToolError::new("`since` is after `until`"));
            }
            ToolCall::Search {
                channel: channel(a.channel)?,
                text: a.text.map(|t| bounded("text", t, SEARCH_MAX)).transpose()?,
                author: a
                    .author
                    .map(|t| bounded("author", t, NAME_MAX))
                    .transpose()?,
                since: a.since,
                until: a.until,
                limit: limit(a.limit)?,
            }
        }
        "post" => {
            let a: Post = input(name, args)?;
            let text = bounded("text", a.text, POST_MAX)?;
            if text.trim().is_empty() {
                return Err(ToolError::new("`text` is empty: nothing was posted"));
            }
            ToolCall::Post {
                channel: channel(a.channel)?,
                thread: a.thread.map(|t| event_id("thread", &t)).transpose()?,
                text,
            }
        }
        "list_personas" => {
            let _: ListPersonas = input(name, args)?;
            ToolCall::ListPersonas
        }
        _ => return Ok(None),
    };
    Ok(Some(call))
}

fn input<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::new(format!("{tool}: {e}")))
}

fn channel(c: Option<String>) -> Result<Option<String>, ToolError> {
    c.map(|c| bounded("channel", c, NAME_MAX)).transpose()
}

fn limit(n: Option<u32>) -> Result<usize, ToolError> {
    match n {
        None => Ok(LIMIT_DEFAULT),
        Some(n) if (1..=LIMIT_MAX as u32).contains(&n) => Ok(n as usize),
        Some(n) => Err(ToolError::new(format!(
            "`limit` must be 1 to {LIMIT_MAX}, not {n}"
        ))),
    }
}

/// A string of at most `max` bytes with no control characters (line breaks allowed in text).
fn bounded(field: &str, s: String, max: usize) -> Result<String, ToolError> {
    if s.len() > max {
        return Err(ToolError::new(format!(
            "`{field}` is {} bytes; at most {max} are taken",
            s.len()
        )));
    }
    let multiline = field == "text";
    if s.chars()
        .any(|c| c.is_control() && !(multiline && (c == '\n' || c == '\t')))
    {
        return Err(ToolError::new(format!(
            "`{field}` holds control characters"
        )));
    }
    Ok(s)
}

/// A message id: 64 hex digits (lower-cased).
fn event_id(field: &str, s: &str) -> Result<String, ToolError> {
    let s = s.trim();
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(ToolError::new(format!(
            "`{field}` must be a message id of 64 hex digits"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> Result<Option<ToolCall>, ToolError> {
        let Value::Object(map) = args else { panic!() };
        parse(name, Some(map))
    }

    #[test]
    fn every_tool_has_an_object_schema_naming_its_fields() {
        for t in listed() {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                t.name
            );
        }
        let post = listed().into_iter().find(|t| t.name == "post").unwrap();
        let props = post.input_schema["properties"].as_object().unwrap();
        assert!(props.contains_key("text") && props.contains_key("thread"));
    }

    #[test]
    fn hostile_inputs_are_refused_with_what_is_wrong() {
        let e = call("post", json!({"text": "x".repeat(POST_MAX + 1)})).unwrap_err();
        assert!(e.0.contains("at most"), "{e}");
        let e = call("post", json!({"text": "  "})).unwrap_err();
        assert!(e.0.contains("empty"), "{e}");
        let e = call("post", json!({"text": "hi", "thread": "../../etc"})).unwrap_err();
        assert!(e.0.contains("64 hex"), "{e}");
        let e = call("post", json!({"text": "hi", "key": "nsec1"})).unwrap_err();
        assert!(e.0.contains("unknown field"), "{e}");
        let e = call("read_channel", json!({"limit": 100000})).unwrap_err();
        assert!(e.0.contains("1 to 100"), "{e}");
        let e = call("read_channel", json!({"channel": "gen\u{0}eral"})).unwrap_err();
        assert!(e.0.contains("control"), "{e}");
        let e = call("search_channel", json!({"since": 10, "until": 5})).unwrap_err();
        assert!(e.0.contains("after"), "{e}");
        assert_eq!(call("no_such_tool", json!({})).unwrap(), None);
    }

    #[test]
    fn good_inputs_come_out_checked() {
        let id = "AB".repeat(32);
        assert_eq!(
            call(
                "post",
                json!({"text": "line\nnext", "thread": id, "channel": "general"})
            )
            .unwrap(),
            Some(ToolCall::Post {
                channel: Some("general".into()),
                thread: Some("ab".repeat(32)),
                text: "line\nnext".into()
            })
        );
        assert_eq!(
            call("read_thread", json!({})).unwrap(),
            Some(ToolCall::ReadThread {
                thread: None,
                limit: 20
            })
        );
    }
}
