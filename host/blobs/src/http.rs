//! One HTTP/1.1 request a connection (then close), the head read within a size and time bound
//! and parsed by `httparse`: `GET`/`HEAD /<sha256>[.ext]`, `PUT /upload`, `OPTIONS` (CORS, as
//! BUD-01 asks). Refusals carry their reason in `X-Reason`.

use std::time::Duration;

use nostr_sdk::prelude::Timestamp;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::BlobServer;
use crate::store::{StoreError, is_sha256};

/// A request head larger than this is refused.
const HEAD_MAX: usize = 16 * 1024;
/// The head must arrive within this.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// An upload's body must arrive within this.
const BODY_TIMEOUT: Duration = Duration::from_secs(300);

/// A response, before it is written.
struct Answer {
    status: u16,
    reason: Option<String>,
    content_type: &'static str,
    body: Body,
}

enum Body {
    Bytes(Vec<u8>),
    /// A blob's file and length (`None` for HEAD: the length only).
    File(Option<tokio::fs::File>, u64),
}

impl Answer {
    fn refuse(status: u16, reason: impl Into<String>) -> Answer {
        let reason = reason.into();
        Answer {
            status,
            body: Body::Bytes(format!("{reason}\n").into_bytes()),
            reason: Some(reason),
            content_type: "text/plain; charset=utf-8",
        }
    }

    fn json(value: serde_json::Value) -> Answer {
        Answer {
            status: 200,
            reason: None,
            content_type: "application/json",
            body: Body::Bytes(value.to_string().into_bytes()),
        }
    }
}

/// The part of the request the routes look at.
struct Request {
    method: String,
    path: String,
    authorization: Option<String>,
    content_length: Option<u64>,
    chunked: bool,
}

/// Serves one request on `stream` (already accepted, nothing read from it yet).
pub async fn serve_connection(mut stream: TcpStream, server: &BlobServer) -> std::io::Result<()> {
    let (request, leftover) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await
    {
        Ok(Ok(Some(parsed))) => parsed,
        Ok(Ok(None)) => {
            return write(&mut stream, Answer::refuse(400, "malformed request head")).await;
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => return Ok(()),
    };
    let answer = route(&request, leftover, &mut stream, server).await;
    tracing::debug!(
        "blobs: {} {} -> {}",
        request.method,
        request.path,
        answer.status
    );
    write(&mut stream, answer).await
}

async fn route(
    request: &Request,
    leftover: Vec<u8>,
    stream: &mut TcpStream,
    server: &BlobServer,
) -> Answer {
    match (request.method.as_str(), request.path.as_str()) {
        ("OPTIONS", _) => Answer {
            status: 204,
            reason: None,
            content_type: "text/plain",
            body: Body::Bytes(Vec::new()),
        },
        ("PUT", "/upload") => {
            let body = (&leftover[..]).chain(&mut *stream);
            upload(request, body, server).await
        }
        ("GET" | "HEAD", path) => blob(path, request.method == "HEAD", server).await,
        ("PUT", _) => Answer::refuse(404, "uploads go to /upload"),
        _ => Answer::refuse(
            405,
            "this server answers GET, HEAD, PUT /upload and OPTIONS",
        ),
    }
}

/// `GET /<sha256>[.ext]`.
async fn blob(path: &str, head_only: bool, server: &BlobServer) -> Answer {
    let name = path.trim_start_matches('/');
    let sha256 = name.split_once('.').map_or(name, |(s, _)| s);
    if !is_sha256(sha256) {
        return Answer::refuse(
            404,
            "blobs are addressed by their sha256 (64 lower-case hex digits)",
        );
    }
    let Some(file) = server.store.path_of(sha256) else {
        return Answer::refuse(404, "no such blob");
    };
    match tokio::fs::File::open(&file).await {
        Ok(f) => {
            let len = f.metadata().await.map(|m| m.len()).unwrap_or(0);
            Answer {
                status: 200,
                reason: None,
                content_type: "application/octet-stream",
                body: Body::File((!head_only).then_some(f), len),
            }
        }
        Err(_) => Answer::refuse(404, "no such blob"),
    }
}

/// `PUT /upload`: authorised, of a declared length within the caps, its digest one the
/// authorisation names.
async fn upload<R: AsyncRead + Unpin>(request: &Request, body: R, server: &BlobServer) -> Answer {
    let blobs = match crate::check_upload(request.authorization.as_deref(), Timestamp::now()) {
        Ok((_, blobs)) => blobs,
        Err(why) => return Answer::refuse(401, why.to_string()),
    };
    if request.chunked {
        return Answer::refuse(411, "send the blob with a Content-Length");
    }
    let Some(size) = request.content_length else {
        return Answer::refuse(411, "send the blob with a Content-Length");
    };
    if let Err(e) = server.store.admits(size) {
        return Answer::refuse(413, e.to_string());
    }
    let mut body = body.take(size);
    let put = tokio::time::timeout(BODY_TIMEOUT, server.store.put(&mut body, size, &blobs)).await;
    match put {
        Ok(Ok(d)) => Answer::json(serde_json::json!({
            "url": format!("{}/{}", server.public_url.trim_end_matches('/'), d.sha256),
            "sha256": d.sha256,
            "size": d.size,
            "type": "application/octet-stream",
            "uploaded": Timestamp::now().as_secs(),
        })),
        Ok(Err(e @ (StoreError::TooLarge { .. } | StoreError::Full { .. }))) => {
            Answer::refuse(413, e.to_string())
        }
        Ok(Err(e @ (StoreError::Digest { .. } | StoreError::Short { .. }))) => {
            Answer::refuse(400, e.to_string())
        }
        Ok(Err(StoreError::Io(e))) => {
            tracing::warn!("blobs: cannot store an upload: {e}");
            Answer::refuse(500, "the blob could not be stored")
        }
        Err(_) => Answer::refuse(408, "the body did not arrive in time"),
    }
}

/// Reads up to the end of the head; the parsed request and the body bytes read with it. `None`
/// for a head that does not parse or is too large.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<(Request, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let parsed = parse(&req);
                return Ok(parsed.map(|r| (r, buf[len..].to_vec())));
            }
            Ok(httparse::Status::Partial) if buf.len() < HEAD_MAX => continue,
            _ => return Ok(None),
        }
    }
}

fn parse(req: &httparse::Request<'_, '_>) -> Option<Request> {
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let path = req.path?;
    Some(Request {
        method: req.method?.to_string(),
        path: path.split(['?', '#']).next().unwrap_or("").to_string(),
        authorization: header("authorization").map(str::to_string),
        content_length: match header("content-length") {
            Some(v) => Some(v.parse().ok()?),
            None => None,
        },
        chunked: header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked")),
    })
}

async fn write(stream: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
    let len = match &answer.body {
        Body::Bytes(b) => b.len() as u64,
        Body::File(_, n) => *n,
    };
    let reason = answer
        .reason
        .as_deref()
        .map(|r| format!("X-Reason: {}\r\n", r.replace(['\r', '\n'], " ")))
        .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {len}\r\n{reason}\
         Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Headers: Authorization, Content-Type\r\n\
         Access-Control-Allow-Methods: GET, HEAD, PUT, OPTIONS\r\nConnection: close\r\n\r\n",
        answer.status,
        status_text(answer.status),
        answer.content_type
    );
    stream.write_all(head.as_bytes()).await?;
    match answer.body {
        Body::Bytes(b) => stream.write_all(&b).await?,
        Body::File(Some(mut f), _) => {
            tokio::io::copy(&mut f, stream).await?;
        }
        Body::File(None, _) => {}
    }
    stream.shutdown().await
}

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        _ => "Internal Server Error",
    }
}
