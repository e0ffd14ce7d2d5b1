//! The `proxy` route: an HTTP proxy an agent's `HTTPS_PROXY` points at. `CONNECT host:port` opens a
//! tunnel, a plain `http://` request is forwarded; both only to the hosts of the agent's list.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use apiary_addr::Host;

use crate::rules;
use crate::{CONNECT_TIMEOUT, PROXY, Policy, Refusal, Report, refused};

type Body = BoxBody<Bytes, hyper::Error>;

pub(crate) async fn serve<S>(conn: S, policy: &Policy, report: &Report)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let policy = Arc::new(policy.clone());
    let report = Arc::clone(report);
    let service = hyper::service::service_fn(move |req| {
        let (policy, report) = (Arc::clone(&policy), Arc::clone(&report));
        async move { Ok::<_, hyper::Error>(handle(req, &policy, &report).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(conn), service)
        .with_upgrades()
        .await;
}

async fn handle(req: Request<Incoming>, policy: &Policy, report: &Report) -> Response<Body> {
    let Some((host, port)) = target(&req) else {
        return status(
            StatusCode::BAD_REQUEST,
            "a proxy request names host and port",
        );
    };
    let addr = match admit(&host, port, policy).await {
        Ok(addr) => addr,
        Err(refusal) => {
            tracing::warn!(target = %refusal.target, "agent egress refused: {}", refusal.why);
            let text = format!("apiary refused {}: {}", refusal.target, refusal.why);
            report(refusal);
            return status(StatusCode::FORBIDDEN, &text);
        }
    };
    if req.method() == Method::CONNECT {
        tunnel(req, addr).await
    } else {
        forward(req, addr).await
    }
}

/// The host and port a proxy request is for: `CONNECT`'s authority, or an absolute URL's.
fn target(req: &Request<Incoming>) -> Option<(String, u16)> {
    let uri = req.uri();
    let host = uri.host()?.to_string();
    let default = if uri.scheme_str() == Some("https") || req.method() == Method::CONNECT {
        443
    } else {
        80
    };
    Some((host, uri.port_u16().unwrap_or(default)))
}

/// The address to connect to for `host:port`, when the list allows it.
pub async fn admit(host: &str, port: u16, policy: &Policy) -> Result<SocketAddr, Refusal> {
    let shown = format!("{host}:{port}");
    let Some(rule) = policy.hosts.iter().find(|r| r.admits(host, port)) else {
        return Err(refused(
            PROXY,
            &shown,
            "not in the agent's host list (`agent_net`)",
        ));
    };
    let addrs: Vec<SocketAddr> = match rules::normalise(host) {
        Some(Host::Addr(a)) => vec![SocketAddr::new(a, port)],
        Some(Host::Name(name)) => tokio::net::lookup_host((name.as_str(), port))
            .await
            .map_err(|e| refused(PROXY, &shown, format!("cannot resolve: {e}")))?
            .collect(),
        None => return Err(refused(PROXY, &shown, "not a host name or address")),
    };
    // A name that resolves inside (a rebinding name, `localhost`) is refused unless the entry is
    // that very address.
    addrs
        .into_iter()
        .find(|a| !rules::is_internal(a.ip()) || rule.address() == Some(a.ip()))
        .ok_or_else(|| {
            refused(
                PROXY,
                &shown,
                "resolves to an internal address; name the address itself in `agent_net` to allow it",
            )
        })
}

async fn tunnel(req: Request<Incoming>, addr: SocketAddr) -> Response<Body> {
    let upstream = match connect(addr).await {
        Ok(s) => s,
        Err(e) => return status(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    tokio::spawn(async move {
        if let Ok(upgraded) = hyper::upgrade::on(req).await {
            let mut upgraded = TokioIo::new(upgraded);
            let mut upstream = upstream;
            crate::splice(&mut upgraded, &mut upstream).await;
        }
    });
    Response::new(empty())
}

async fn forward(mut req: Request<Incoming>, addr: SocketAddr) -> Response<Body> {
    if req.uri().scheme_str() != Some("http") {
        return status(
            StatusCode::BAD_REQUEST,
            "only http:// is forwarded; use CONNECT",
        );
    }
    let stream = match connect(addr).await {
        Ok(s) => s,
        Err(e) => return status(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    let Ok((mut send, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return status(StatusCode::BAD_GATEWAY, "upstream handshake failed");
    };
    tokio::spawn(conn);
    // Origin form upstream; the proxy's own headers stay here.
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    *req.uri_mut() = path.parse().unwrap_or_default();
    req.headers_mut().remove("proxy-authorization");
    req.headers_mut().remove("proxy-connection");
    match send.send_request(req).await {
        Ok(resp) => resp.map(|b| b.boxed()),
        Err(e) => status(StatusCode::BAD_GATEWAY, &e.to_string()),
    }
}

async fn connect(addr: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

pub(crate) fn status(code: StatusCode, text: &str) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(Bytes::from(format!("{text}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = code;
    resp
}

fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}
