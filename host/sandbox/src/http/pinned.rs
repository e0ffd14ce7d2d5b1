//! Sending a request to the addresses that were checked, not to a name: resolving the name again
//! to connect would let a DNS server answer a public address to the check and a loopback one to
//! the connection. TLS still verifies the certificate for the name the guest asked for.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions};

/// Where a request goes: the checked addresses, in order, and the name TLS verifies (`None`:
/// plain HTTP).
#[derive(Debug)]
pub(super) struct Target {
    pub addrs: Vec<SocketAddr>,
    pub tls: Option<ServerName<'static>>,
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// The response and the future that finishes the connection's I/O (for the response body).
type Sent = (
    http::Response<http_body_util::combinators::UnsyncBoxBody<Bytes, HttpError>>,
    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
);

/// Sends `request` over a connection to one of `target`'s addresses (the first that answers).
pub(super) async fn send(
    mut request: http::Request<impl Body<Data = Bytes, Error = HttpError> + Send + 'static>,
    options: RequestOptions,
    target: Target,
) -> Result<Sent, HttpError> {
    let connect_timeout = options.connect_timeout.unwrap_or_default();
    let first_byte_timeout = options.first_byte_timeout.unwrap_or_default();
    let tcp = tokio::time::timeout(connect_timeout, connect(&target.addrs))
        .await
        .map_err(|_| HttpError::ConnectionTimeout)??;
    let stream: Box<dyn Stream> = match target.tls {
        Some(name) => Box::new(tls(tcp, name).await?),
        None => Box::new(tcp),
    };
    let (mut sender, conn) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| HttpError::ConnectionTimeout)??;
    // The request line carries the path only; the authority stays in the `Host` header.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| HttpError::HttpRequestUriInvalid)?;
    let response = sender.send_request(request);
    let mut response = std::pin::pin!(tokio::time::timeout(first_byte_timeout, response));
    // Wait for the response head while driving the connection; the rest of the connection's
    // I/O (the body) is returned to the caller.
    let mut conn = Some(Box::pin(conn));
    let head = poll_fn(|cx| {
        if let Poll::Ready(r) = response.as_mut().poll(cx) {
            return Poll::Ready(r.map_err(|_| HttpError::ConnectionReadTimeout));
        }
        if let Some(c) = conn.as_mut()
            && let Poll::Ready(done) = c.as_mut().poll(cx)
        {
            conn = None;
            if let Err(e) = done {
                return Poll::Ready(Ok(Err(e)));
            }
        }
        Poll::Pending
    })
    .await?
    .map_err(HttpError::from)?;
    let io: Box<dyn Future<Output = Result<(), HttpError>> + Send> = match conn {
        Some(c) => Box::new(async move { c.await.map_err(HttpError::from) }),
        None => Box::new(async { Ok(()) }),
    };
    let response = head.map(|body| body.map_err(HttpError::from).boxed_unsync());
    Ok((response, io))
}

/// A TCP connection to the first of `addrs` that accepts one.
async fn connect(addrs: &[SocketAddr]) -> Result<TcpStream, HttpError> {
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(HttpError::Connect(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address to connect to")
    })))
}

/// TLS over `tcp`, verifying the server's certificate for `name` against the web's roots.
async fn tls(
    tcp: TcpStream,
    name: ServerName<'static>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, HttpError> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(HttpError::Tls)
}
