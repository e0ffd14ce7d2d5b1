//! A model provider on 127.0.0.1 for the real-agent tests: it speaks the streaming HTTP APIs the
//! agents call (Anthropic's Messages API, OpenAI's Responses API, Gemini's
//! `streamGenerateContent`, all as server-sent events),
//! answers with one scripted text, and records every request. It also answers as a minimal
//! streamable-HTTP MCP server at `/mcp` with one tool, `write_note`, so a test sees an agent
//! connect to a persona's MCP server and whether it called the tool.
//!
//! A [`Script`] makes the model use tools (Anthropic `tool_use`, OpenAI `function_call`): while a turn's conversation holds fewer tool
//! results than the script has tool uses, the next answer is the next tool use (so the agent runs
//! its real tool machinery, permission requests included), then the text. The first request
//! whose conversation contains `!stall` is never answered (the connection is held until the agent
//! gives up on it); later ones are.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One request the stub received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub body: Value,
}

pub struct Provider {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// What the stub answers: tool uses first (name, input), then the text.
#[derive(Debug, Default)]
pub struct Script {
    pub tools: Vec<(String, Value)>,
    pub answer: String,
    /// Set once a `!stall` request was held.
    pub stalled: std::sync::atomic::AtomicBool,
}

impl Provider {
    /// Starts the stub; every model answer is `answer`.
    pub fn start(answer: &str) -> Provider {
        Provider::scripted(Script {
            answer: answer.to_string(),
            ..Script::default()
        })
    }

    /// Starts the stub with tool uses before the answer (the Anthropic side).
    pub fn scripted(script: Script) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the provider stub");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (log, script) = (Arc::clone(&seen), Arc::new(script));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, script) = (Arc::clone(&log), Arc::clone(&script));
                std::thread::spawn(move || serve(stream, &log, &script));
            }
        });
        Provider { url, seen }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits (bounded) for a request matching `pred`.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&Seen) -> bool) -> Seen {
        let deadline = Instant::now() + super::live::WAIT;
        loop {
            if let Some(s) = self.requests().into_iter().find(&pred) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the provider stub never saw {what}; it saw: {:#?}",
                self.requests()
                    .iter()
                    .map(|s| format!("{} {}", s.method, s.path))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One connection: requests until the client closes it (keep-alive).
fn serve(stream: TcpStream, log: &Mutex<Vec<Seen>>, script: &Script) {
    let mut writer = stream.try_clone().expect("clone stream");
    let mut reader = BufReader::new(stream);
    while let Some((method, path, body)) = read_request(&mut reader) {
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        log.lock().unwrap().push(Seen {
            method: method.clone(),
            path: path.clone(),
            body: body.clone(),
        });
        if body.get("tools").is_some()
            && body.to_string().contains("!stall")
            && !script
                .stalled
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            // Never answered: held until the agent closes the connection (or 5 minutes).
            let mut rest = Vec::new();
            let _ = reader
                .get_ref()
                .set_read_timeout(Some(Duration::from_secs(300)));
            let _ = reader.read_to_end(&mut rest);
            return;
        }
        let (status, kind, out) = respond(&method, &path, &body, script);
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
            out.len()
        );
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(&out).is_err() {
            return;
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let mut words = line.split_whitespace();
    let (method, path) = (words.next()?.to_string(), words.next()?.to_string());
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok().filter(|n| *n > 0)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some((method, path, body))
}

fn respond(
    method: &str,
    path: &str,
    body: &Value,
    script: &Script,
) -> (&'static str, &'static str, Vec<u8>) {
    let answer = script.answer.as_str();
    const JSON: &str = "application/json";
    const SSE: &str = "text/event-stream";
    let path = path.split('?').next().unwrap_or_default();
    match (method, path) {
        ("POST", "/v1/messages/count_tokens") => (
            "200 OK",
            JSON,
            json!({"input_tokens": 10}).to_string().into(),
        ),
        ("POST", "/v1/messages") if body["stream"] == true => match next_tool(body, script) {
            Some((n, (name, input))) => ("200 OK", SSE, anthropic_tool_use(body, n, name, input)),
            None => ("200 OK", SSE, anthropic_stream(body, answer)),
        },
        ("POST", "/v1/messages") => (
            "200 OK",
            JSON,
            json!({
                "id": "msg_stub", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": answer}], "stop_reason": "end_turn",
                "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}
            })
            .to_string()
            .into(),
        ),
        ("POST", "/v1/responses") => match next_function(body, script) {
            Some((n, (name, input))) => (
                "200 OK",
                SSE,
                responses_function_call(
                    n,
                    &offered_name(body, name),
                    namespace_of(body, name),
                    input,
                ),
            ),
            None => ("200 OK", SSE, responses_stream(answer)),
        },
        // Gemini's API: `/v1beta/models/<model>:<method>`.
        ("POST", p) if p.starts_with("/v1beta/models/") => match p.rsplit(':').next() {
            Some("streamGenerateContent") => match next_gemini_call(body, script) {
                Some((name, input)) => {
                    ("200 OK", SSE, gemini_call(&offered_name(body, name), input))
                }
                None => ("200 OK", SSE, gemini_stream(answer)),
            },
            Some("generateContent") => ("200 OK", JSON, gemini_answer(answer).to_string().into()),
            Some("countTokens") => (
                "200 OK",
                JSON,
                json!({"totalTokens": 10}).to_string().into(),
            ),
            _ => ("404 Not Found", JSON, b"{}".to_vec()),
        },
        ("POST", "/mcp") => mcp(body),
        _ => ("404 Not Found", JSON, b"{}".to_vec()),
    }
}

fn sse(events: &[(&str, Value)]) -> Vec<u8> {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect::<String>()
        .into_bytes()
}

/// The script's next tool use for this request (its number and the tool), when the request
/// offers tools and its conversation has fewer tool results than the script has tool uses.
fn next_tool<'a>(body: &Value, script: &'a Script) -> Option<(usize, &'a (String, Value))> {
    let offered = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    if !offered {
        return None;
    }
    let results = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|c| c["type"] == "tool_result")
        .count();
    script.tools.get(results).map(|t| (results, t))
}

/// The Messages API's stream: one `tool_use` block (its input streamed as JSON), stop reason
/// `tool_use`.
fn anthropic_tool_use(req: &Value, n: usize, name: &str, input: &Value) -> Vec<u8> {
    let id = format!("toolu_stub_{n}");
    sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {
            "id": format!("msg_stub_tool_{n}"), "type": "message", "role": "assistant", "model": req["model"],
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

/// The Messages API's stream: one text block.
fn anthropic_stream(req: &Value, answer: &str) -> Vec<u8> {
    sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {
            "id": "msg_stub", "type": "message", "role": "assistant", "model": req["model"],
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": answer}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

/// The script's next tool use for a Responses request: as for [`next_tool`], counting the
/// `function_call_output` items of its input.
fn next_function<'a>(body: &Value, script: &'a Script) -> Option<(usize, &'a (String, Value))> {
    let offered = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    if !offered {
        return None;
    }
    let results = body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .count();
    script.tools.get(results).map(|t| (results, t))
}

/// The Responses API's stream: one function call (its arguments as a JSON string).
fn responses_function_call(
    n: usize,
    name: &str,
    namespace: Option<String>,
    input: &Value,
) -> Vec<u8> {
    let mut item = json!({"type": "function_call", "id": format!("fc_stub_{n}"),
        "call_id": format!("call_stub_{n}"), "name": name, "arguments": input.to_string(),
        "status": "completed"});
    if let Some(ns) = namespace {
        item["namespace"] = json!(ns);
    }
    sse(&[
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": format!("resp_stub_{n}")}}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {
            "id": format!("resp_stub_{n}"), "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}}),
        ),
    ])
}

/// The Responses API's stream: one assistant message, then the usage.
fn responses_stream(answer: &str) -> Vec<u8> {
    let message = |content: Value| json!({"type": "message", "id": "msg_stub", "role": "assistant", "content": content});
    sse(&[
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": "resp_stub"}}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added",
            "output_index": 0, "item": message(json!([]))}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta",
            "item_id": "msg_stub", "output_index": 0, "content_index": 0, "delta": answer}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done",
            "output_index": 0, "item": message(json!([{"type": "output_text", "text": answer}]))}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {
            "id": "resp_stub", "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}}),
        ),
    ])
}

/// The script's next tool use for a Gemini request: as for [`next_tool`], counting the
/// `functionResponse` parts of its contents.
fn next_gemini_call<'a>(body: &Value, script: &'a Script) -> Option<&'a (String, Value)> {
    let offered = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    if !offered {
        return None;
    }
    let results = body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter(|p| p.get("functionResponse").is_some())
        .count();
    script.tools.get(results)
}

/// A script name `~suffix` is the first tool the request offers whose name ends with `suffix`
/// (runtimes spell MCP tools their own way); any other name is itself.
fn offered_name(body: &Value, name: &str) -> String {
    let Some(suffix) = name.strip_prefix('~') else {
        return name.to_string();
    };
    // Gemini nests its functions in `functionDeclarations`; the Responses API lists them, or
    // holds them in a namespace's `tools`.
    let tools = body["tools"].as_array().into_iter().flatten();
    tools
        .flat_map(|t| {
            let nested = t["functionDeclarations"]
                .as_array()
                .or_else(|| t["tools"].as_array())
                .cloned()
                .unwrap_or_default();
            std::iter::once(t.clone()).chain(nested)
        })
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .find(|n| n.ends_with(suffix))
        .as_deref()
        .unwrap_or(suffix)
        .to_string()
}

/// The Responses API namespace (Codex's `mcp__<server>`) holding the tool a `~suffix` names.
fn namespace_of(body: &Value, name: &str) -> Option<String> {
    let suffix = name.strip_prefix('~')?;
    body["tools"].as_array()?.iter().find_map(|t| {
        let held = t["tools"].as_array()?;
        held.iter()
            .any(|f| f["name"].as_str().is_some_and(|n| n.ends_with(suffix)))
            .then(|| t["name"].as_str().map(str::to_string))
            .flatten()
    })
}

/// Gemini's stream: one `functionCall` part.
fn gemini_call(name: &str, args: &Value) -> Vec<u8> {
    let chunk = json!({"candidates": [{"content": {"role": "model",
        "parts": [{"functionCall": {"name": name, "args": args}}]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}});
    format!("data: {chunk}\r\n\r\n").into_bytes()
}

/// Gemini's `GenerateContentResponse` with one text part.
fn gemini_answer(answer: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": answer}]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}})
}

/// Gemini's `streamGenerateContent?alt=sse`: the answer in two chunks, as `data:` events.
fn gemini_stream(answer: &str) -> Vec<u8> {
    let split = (0..=answer.len() / 2)
        .rev()
        .find(|i| answer.is_char_boundary(*i))
        .unwrap_or(0);
    let (first, rest) = answer.split_at(split);
    let mut head = gemini_answer(first);
    head["candidates"][0]
        .as_object_mut()
        .unwrap()
        .remove("finishReason");
    [head, gemini_answer(rest)]
        .iter()
        .map(|d| format!("data: {d}\r\n\r\n"))
        .collect::<String>()
        .into_bytes()
}

/// A streamable-HTTP MCP server with one tool, `write_note`, which does nothing but answer.
fn mcp(req: &Value) -> (&'static str, &'static str, Vec<u8>) {
    let Some(id) = req.get("id").cloned() else {
        return ("202 Accepted", "application/json", Vec::new());
    };
    let result = match req["method"].as_str() {
        Some("initialize") => {
            json!({"protocolVersion": req["params"]["protocolVersion"].as_str().unwrap_or("2025-03-26"),
            "capabilities": {"tools": {}}, "serverInfo": {"name": "stub-mcp", "version": "1.0.0"}})
        }
        Some("tools/list") => json!({"tools": [{"name": "write_note",
            "description": "Writes a note for the team.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}),
        Some("tools/call") => json!({"content": [{"type": "text", "text": "noted"}]}),
        _ => json!({}),
    };
    (
        "200 OK",
        "application/json",
        json!({"jsonrpc": "2.0", "id": id, "result": result})
            .to_string()
            .into(),
    )
}
