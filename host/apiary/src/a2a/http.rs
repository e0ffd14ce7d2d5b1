//! One HTTP/1.1 request a connection, then close: the head (size- and time-bounded, parsed by
//! `httparse`) and a body of the declared `Content-Length` up to [`BODY_MAX`]; the answer is a
//! whole response or a stream of server-sent events.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HEAD_MAX: usize = 16 * 1024;
/// A JSON-RPC request larger than this is refused (413).
pub const BODY_MAX: usize = 1024 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The part of a request the server looks at.
pub struct Request {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    /// `A2A-Version`, when sent.
    pub version: Option<String>,
    pub body: Vec<u8>,
}

/// Reads one request; `Err` is the status and text refusing it.
pub async fn read(stream: &mut TcpStream) -> Result<Request, (u16, &'static str)> {
    tokio::time::timeout(READ_TIMEOUT, read_inner(stream))
        .await
        .map_err(|_| (408, "request timeout"))?
}

async fn read_inner(stream: &mut TcpStream) -> Result<Request, (u16, &'static str)> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|_| (400, "bad request"))?;
        if n == 0 {
            return Err((400, "incomplete request"));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 48];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let header = |name: &str| {
                    req.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                        .map(|v| v.trim().to_string())
                };
                let length: usize = match header("content-length") {
                    Some(v) => v.parse().map_err(|_| (400, "bad Content-Length"))?,
                    None => 0,
                };
                if length > BODY_MAX {
                    return Err((413, "request body too large"));
                }
                let mut request = Request {
                    method: req.method.unwrap_or("").to_string(),
                    path: req
                        .path
                        .unwrap_or("/")
                        .split(['?', '#'])
                        .next()
                        .unwrap_or("/")
                        .to_string(),
                    authorization: header("authorization"),
                    version: header("a2a-version"),
                    body: buf[len..].to_vec(),
                };
                while request.body.len() < length {
                    let n = stream
                        .read(&mut chunk)
                        .await
                        .map_err(|_| (400, "bad request"))?;
                    if n == 0 {
                        return Err((400, "incomplete body"));
                    }
                    request.body.extend_from_slice(&chunk[..n]);
                }
                request.body.truncate(length);
                return Ok(request);
            }
            Ok(httparse::Status::Partial) if buf.len() < HEAD_MAX => continue,
            Ok(httparse::Status::Partial) => return Err((431, "request head too large")),
            Err(_) => return Err((400, "bad request")),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    }
}

/// Writes a whole response and closes.
pub async fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) {
    let auth = if status == 401 {
        "WWW-Authenticate: Bearer\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{auth}Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
}

/// Starts a server-sent event stream; [`event`] writes each event.
pub async fn start_events(stream: &mut TcpStream) -> std::io::Result<()> {
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        )
        .await
}

/// One server-sent event carrying `json` (one line: JSON has no raw newlines).
pub async fn event(stream: &mut TcpStream, json: &str) -> std::io::Result<()> {
    stream
        .write_all(format!("data: {json}\n\n").as_bytes())
        .await?;
    stream.flush().await
}
