//! `http-hook`: a hook that does what its message says with outbound HTTP and the environment, for
//! the host's capability tests (granted and not). Each answer is written to `/workspace`:
//!
//! - `post URL TEXT`: POST `TEXT` to `URL` (a webhook); `Err` with the reason when it fails.
//! - `get URL`: GET `URL`, read the whole body; `/workspace/get.txt` gets `STATUS BYTES LOCATION`.
//! - `env`: `/workspace/env.txt` gets every variable the hook can see, `NAME=VALUE` a line.
//! - `read FILE`: `/workspace/read.txt` gets FILE's text; then it tries to write beside FILE.

wit_bindgen::generate!({ world: "hook", path: "../../../wit/apiary-plugin@0.1.0" });

use exports::apiary::plugin::lifecycle::{Guest, MessageContext, Persona};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};

struct HttpHook;

/// The response of one request: status, body length, `location` header.
struct Answer {
    status: u16,
    bytes: usize,
    location: String,
}

fn request(method: Method, url: &str, body: &[u8]) -> Result<Answer, String> {
    let (scheme, rest) = match url.split_once("://") {
        Some(("http", rest)) => (Scheme::Http, rest),
        Some(("https", rest)) => (Scheme::Https, rest),
        _ => return Err(format!("not an http(s) URL: {url}")),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let req = OutgoingRequest::new(Fields::new());
    req.set_method(&method).map_err(|()| "bad method")?;
    req.set_scheme(Some(&scheme)).map_err(|()| "bad scheme")?;
    req.set_authority(Some(authority))
        .map_err(|()| "bad authority")?;
    req.set_path_with_query(Some(path))
        .map_err(|()| "bad path")?;
    let out = req.body().map_err(|()| "no body")?;
    {
        let stream = out.write().map_err(|()| "no body stream")?;
        stream
            .blocking_write_and_flush(body)
            .map_err(|e| format!("write: {e:?}"))?;
    }
    OutgoingBody::finish(out, None).map_err(|e| format!("finish: {e:?}"))?;
    let pending = outgoing_handler::handle(req, None).map_err(|e| format!("refused: {e:?}"))?;
    pending.subscribe().block();
    let response = pending
        .get()
        .ok_or("no response")?
        .map_err(|()| "response taken twice")?
        .map_err(|e| format!("failed: {e:?}"))?;
    let location = response
        .headers()
        .get("location")
        .first()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default();
    let body = response.consume().map_err(|()| "no response body")?;
    let stream = body.stream().map_err(|()| "no response stream")?;
    let mut bytes = 0;
    loop {
        match stream.blocking_read(64 << 10) {
            Ok(chunk) => bytes += chunk.len(),
            Err(wasip2::io::streams::StreamError::Closed) => break,
            Err(e) => {
                return Err(format!(
                    "reading the body failed after {bytes} bytes: {e:?}"
                ));
            }
        }
    }
    Ok(Answer {
        status: response.status(),
        bytes,
        location,
    })
}

fn write(name: &str, text: &str) -> Result<(), String> {
    std::fs::write(format!("/workspace/{name}"), text).map_err(|e| format!("write {name}: {e}"))
}

impl Guest for HttpHook {
    fn on_start(_: Persona) -> Result<(), String> {
        Ok(())
    }

    fn on_stop(_: Persona) -> Result<(), String> {
        Ok(())
    }

    fn on_message(context: MessageContext) -> Result<(), String> {
        let text = context.message.text;
        let mut words = text.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("post"), Some(url), body) => {
                let a = request(Method::Post, url, body.unwrap_or("").as_bytes())?;
                if a.status / 100 != 2 {
                    return Err(format!("webhook answered {}", a.status));
                }
                Ok(())
            }
            (Some("get"), Some(url), _) => {
                let a = request(Method::Get, url, b"")?;
                write(
                    "get.txt",
                    &format!("{} {} {}", a.status, a.bytes, a.location),
                )
            }
            (Some("read"), Some(file), _) => {
                let text =
                    std::fs::read_to_string(file).map_err(|e| format!("read {file}: {e}"))?;
                write("read.txt", &text)?;
                match std::fs::write(format!("{file}.new"), "x") {
                    Ok(()) => Err(format!("wrote beside {file}")),
                    Err(_) => Ok(()),
                }
            }
            (Some("env"), _, _) => {
                let lines: Vec<String> =
                    std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
                write("env.txt", &lines.join("\n"))
            }
            _ => Ok(()),
        }
    }
}

export!(HttpHook);
