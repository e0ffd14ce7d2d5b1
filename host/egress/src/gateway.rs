//! The `gateway` route: the agent's provider base URL (`ANTHROPIC_BASE_URL`, ...) points here, on
//! its own loopback, with the upstream's path (`http://127.0.0.1:<port>/v1` for
//! `https://api.openai.com/v1`), so request paths go on unchanged. Each request goes to the
//! operator's upstream (`https://api.anthropic.com` unless configured) with the placeholder the
//! agent holds replaced by the real key, in headers and query only: never in a body, which the
//! model would see.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;

use crate::proxy::status;

type Body = BoxBody<Bytes, hyper::Error>;

/// Where the provider's requests go, and what is put into them.
#[derive(Debug, Clone)]
pub struct Gateway {
    pub upstream: Upstream,
    pub secrets: Vec<Secret>,
}

/// A key the agent holds only as `placeholder`.
#[derive(Clone)]
pub struct Secret {
    pub placeholder: String,
    pub value: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("placeholder", &self.placeholder)
            .finish_non_exhaustive()
    }
}

/// The provider's base URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Without a trailing slash (`""` for the root): the agent's side of the gateway uses the same.
    pub base_path: String,
}

impl Upstream {
    /// Parses `https://host[:port][/path]` (or `http://` for a server the operator runs).
    pub fn parse(url: &str) -> Result<Upstream, String> {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(format!("`{url}` is not an http or https URL")),
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("`{url}` names no host"))?
            .trim_matches(['[', ']'])
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let base_path = uri.path().trim_end_matches('/').to_string();
        Ok(Upstream {
            tls,
            host,
            port,
            base_path,
        })
    }

    fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match (self.tls, self.port) {
            (true, 443) | (false, 80) => host,
            _ => format!("{host}:{}", self.port),
        }
    }
}

pub(crate) async fn serve<S>(conn: S, gateway: &Gateway)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let gateway = Arc::new(gateway.clone());
    // One upstream connection per agent connection, used for its requests in turn (HTTP/1.1
    // serves one request at a time per connection).
    let upstream: Arc<Mutex<Option<SendRequest<Incoming>>>> = Arc::default();
    let service = hyper::service::service_fn(move |req| {
        let (gateway, upstream) = (Arc::clone(&gateway), Arc::clone(&upstream));
        async move { Ok::<_, hyper::Error>(relay(req, &gateway, &upstream).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(conn), service)
        .await;
}

async fn relay(
    req: Request<Incoming>,
    gateway: &Gateway,
    upstream: &Mutex<Option<SendRequest<Incoming>>>,
) -> Response<Body> {
    let req = match rewrite(req, gateway) {
        Ok(req) => req,
        Err(why) => return status(StatusCode::BAD_REQUEST, &why),
    };
    let mut slot = upstream.lock().await;
    if slot.as_ref().is_none_or(|s| s.is_closed()) {
        match connect(&gateway.upstream).await {
            Ok(send) => *slot = Some(send),
            Err(e) => {
                tracing::warn!(upstream = %gateway.upstream.host, "provider gateway: {e}");
                return status(StatusCode::BAD_GATEWAY, &format!("apiary's gateway: {e}"));
            }
        }
    }
    let send = slot.as_mut().expect("connected above");
    if send.ready().await.is_err() {
        *slot = None;
        return status(StatusCode::BAD_GATEWAY, "apiary's gateway: upstream closed");
    }
    match send.send_request(req).await {
        Ok(resp) => resp.map(|b| b.boxed()),
        Err(e) => {
            *slot = None;
            status(StatusCode::BAD_GATEWAY, &format!("apiary's gateway: {e}"))
        }
    }
}

/// The request as the upstream gets it: its path as it came, the upstream's host,
/// no hop-by-hop headers, and every placeholder replaced by its key.
fn rewrite(mut req: Request<Incoming>, gateway: &Gateway) -> Result<Request<Incoming>, String> {
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    if !path.starts_with('/') {
        return Err("the gateway takes origin-form requests (`POST /v1/...`)".into());
    }
    let path = substitute(path, &gateway.secrets);
    let up = &gateway.upstream;
    *req.uri_mut() = path.parse().map_err(|e| format!("bad path: {e}"))?;
    let headers = req.headers_mut();
    for name in hop_by_hop(headers) {
        headers.remove(name);
    }
    for value in headers.values_mut() {
        if let Ok(text) = value.to_str()
            && gateway
                .secrets
                .iter()
                .any(|s| text.contains(&s.placeholder))
        {
            let mut replaced = HeaderValue::from_str(&substitute(text, &gateway.secrets))
                .map_err(|_| "a key is not a valid header value".to_string())?;
            replaced.set_sensitive(true);
            *value = replaced;
        }
    }
    let host = HeaderValue::from_str(&up.authority()).map_err(|e| e.to_string())?;
    headers.insert(header::HOST, host);
    Ok(req)
}

fn substitute(text: &str, secrets: &[Secret]) -> String {
    secrets.iter().fold(text.to_string(), |t, s| {
        if s.placeholder.is_empty() {
            t
        } else {
            t.replace(&s.placeholder, &s.value)
        }
    })
}

fn hop_by_hop(headers: &http::HeaderMap) -> Vec<HeaderName> {
    let mut names: Vec<HeaderName> = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "upgrade",
    ]
    .iter()
    .map(|n| HeaderName::from_static(n))
    .collect();
    for value in headers.get_all(header::CONNECTION) {
        for token in value.to_str().unwrap_or_default().split(',') {
            if let Ok(name) = HeaderName::from_bytes(token.trim().as_bytes())
                && name != header::CONTENT_LENGTH
                && name != header::TRANSFER_ENCODING
            {
                names.push(name);
            }
        }
    }
    names
}

async fn connect(up: &Upstream) -> std::io::Result<SendRequest<Incoming>> {
    let tcp = tokio::time::timeout(
        crate::CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((up.host.as_str(), up.port)),
    )
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    let _ = tcp.set_nodelay(true);
    if up.tls {
        let tls = crate::tls::connect(&up.host, tcp).await?;
        handshake(tls).await
    } else {
        handshake(tcp).await
    }
}

async fn handshake<S>(io: S) -> std::io::Result<SendRequest<Incoming>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    Ok(send)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_parse_with_their_defaults() {
        let u = Upstream::parse("https://api.anthropic.com").unwrap();
        assert_eq!((u.tls, u.port, u.base_path.as_str()), (true, 443, ""));
        assert_eq!(u.authority(), "api.anthropic.com");
        let u = Upstream::parse("http://127.0.0.1:8080/v1/").unwrap();
        assert_eq!((u.tls, u.port, u.base_path.as_str()), (false, 8080, "/v1"));
        assert_eq!(u.authority(), "127.0.0.1:8080");
        assert!(Upstream::parse("ftp://x").is_err());
        assert!(Upstream::parse("not a url").is_err());
    }

    #[test]
    fn placeholders_are_replaced_everywhere_they_appear() {
        let secrets = [Secret {
            placeholder: "apiary-key-1".into(),
            value: "sk-real".into(),
        }];
        assert_eq!(
            substitute("/v1/models?key=apiary-key-1&x=apiary-key-1", &secrets),
            "/v1/models?key=sk-real&x=sk-real"
        );
        assert_eq!(substitute("Bearer other", &secrets), "Bearer other");
    }
}
