//! Just enough HTTP/1.1 for the operations endpoints: one GET (or HEAD) per connection, the head
//! read within a size and time bound and parsed by `httparse`, a complete response, then close.
//! Scrapers and probes need no more; anything else is refused.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Ops;

/// A request head larger than this is refused (probes and scrapers send a few hundred bytes).
const HEAD_MAX: usize = 8 * 1024;
/// The whole request head must arrive within this (probes send it at once).
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// The answer must be taken within this.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The part of a request the endpoints look at.
pub struct Request {
    pub path: String,
    pub head_only: bool,
    /// The `Accept` header, when sent.
    pub accept: Option<String>,
}

pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type,
            body: body.into(),
        }
    }

    pub fn text(status: u16, body: &str) -> Response {
        Response::new(status, "text/plain; charset=utf-8", format!("{body}\n"))
    }
}

/// Reads one request, answers it from `ops`, closes. `head_read` is called once the head is in
/// (or refused), before answering.
pub async fn serve_one(mut stream: TcpStream, ops: Arc<Ops>, head_read: impl FnOnce()) {
    let head = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await;
    head_read();
    let response = match head {
        Ok(Ok(request)) => {
            let mut r = ops.respond(&request).await;
            if request.head_only {
                // HEAD: the headers GET would send (Content-Length included), no body.
                let len = r.body.len();
                r.body.clear();
                return write(&mut stream, &r, len).await;
            }
            r
        }
        Ok(Err(r)) => r,
        Err(_) => Response::text(408, "request timeout"),
    };
    let len = response.body.len();
    write(&mut stream, &response, len).await;
}

async fn write(stream: &mut TcpStream, r: &Response, len: usize) {
    let _ = tokio::time::timeout(WRITE_TIMEOUT, write_all(stream, r, len)).await;
}

async fn write_all(stream: &mut TcpStream, r: &Response, len: usize) {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {len}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&r.body).await;
    let _ = stream.shutdown().await;
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// The request head, or the response that refuses it.
async fn read_head(stream: &mut TcpStream) -> Result<Request, Response> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|_| Response::text(400, "bad request"))?;
        if n == 0 {
            return Err(Response::text(400, "incomplete request"));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => return request_of(&req),
            Ok(httparse::Status::Partial) if buf.len() < HEAD_MAX => continue,
            Ok(httparse::Status::Partial) => {
                return Err(Response::text(431, "request head too large"));
            }
            Err(_) => return Err(Response::text(400, "bad request")),
        }
    }
}

fn request_of(req: &httparse::Request<'_, '_>) -> Result<Request, Response> {
    let head_only = match req.method {
        Some("GET") => false,
        Some("HEAD") => true,
        _ => return Err(Response::text(405, "only GET and HEAD")),
    };
    let target = req.path.unwrap_or("/");
    // The query string is ignored; the path is compared as it is, never mapped to a file.
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    let accept = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("accept"))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(str::to_string);
    Ok(Request {
        path,
        head_only,
        accept,
    })
}
