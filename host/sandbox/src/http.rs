//! Outbound HTTP (`wasi:http/outgoing-handler`) for a call. Linked for every component, so what
//! componentize-js imports by default links, but refused unless the call's grants name the
//! request's host: the allow-list is checked per request (a redirect is a new request the guest
//! makes, checked again), a response body is capped, and the request waits at most a deadline.
//! A refusal is recorded ([`Violations`]) so the call fails with an error naming the capability.
//!
//! A wait for HTTP blocks inside a host call, where the epoch deadline cannot interrupt the
//! guest; so every request, and every read of its response body, also ends at the call's own
//! deadline ([`HttpPolicy::start_call`]), and the call then fails as past its deadline.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::uri::Scheme;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Limited};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// The most bytes a response body may have before the stream fails.
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;

/// How long connecting, the first byte and the gap between bytes may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What a call tried without a grant (`http:host:port`, or an over-sized response), in order.
#[derive(Debug, Clone, Default)]
pub struct Violations(Arc<Mutex<Vec<String>>>);

impl Violations {
    fn push(&self, what: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(what);
    }

    /// The first violation since the last take, clearing them.
    pub(crate) fn take_first(&self) -> Option<String> {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let first = v.first().cloned();
        v.clear();
        first
    }
}

/// The per-store HTTP policy: the hosts granted, the response cap, the violations seen, the
/// current call's deadline.
pub struct HttpPolicy {
    allowed: Vec<String>,
    max_response: usize,
    pub(crate) violations: Violations,
    /// When the current call must end (set by [`HttpPolicy::start_call`]).
    deadline: Option<Instant>,
    /// An HTTP wait ran into `deadline`.
    past_deadline: Arc<AtomicBool>,
}

impl HttpPolicy {
    pub fn new(allowed: Vec<String>) -> HttpPolicy {
        HttpPolicy {
            allowed,
            max_response: MAX_RESPONSE_BYTES,
            violations: Violations::default(),
            deadline: None,
            past_deadline: Arc::default(),
        }
    }

    /// A call starts that must end by `deadline`: its HTTP waits end then too.
    pub(crate) fn start_call(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
        self.past_deadline.store(false, Ordering::Relaxed);
    }

    /// Whether an HTTP wait of the current call ran into its deadline.
    pub(crate) fn past_deadline(&self) -> bool {
        self.past_deadline.load(Ordering::Relaxed)
    }

    /// Whether `host:port` is granted: an entry with a port must match exactly; one without
    /// allows the default ports (80, 443).
    fn allows(&self, host: &str, port: u16) -> bool {
        let exact = format!("{host}:{port}");
        self.allowed
            .iter()
            .any(|a| *a == exact || (*a == host && matches!(port, 80 | 443)))
    }
}

impl WasiHttpHooks for HttpPolicy {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                    ),
                    HttpError,
                >,
            > + Send,
    > {
        drop(fut);
        let uri = request.uri();
        let host = uri.host().unwrap_or("").to_ascii_lowercase();
        let tls = uri.scheme() == Some(&Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        if !self.allows(&host, port) {
            self.violations
                .push(format!("capability http:{host}:{port} is not granted"));
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        let deadline = self
            .deadline
            .unwrap_or_else(|| Instant::now() + REQUEST_TIMEOUT);
        let options = bounded(options, deadline);
        let max = self.max_response;
        let violations = self.violations.clone();
        let past = self.past_deadline.clone();
        Box::new(async move {
            let send = wasmtime_wasi_http::default_send_request(request, Some(options));
            let Ok(sent) = tokio::time::timeout_at(deadline.into(), send).await else {
                past.store(true, Ordering::Relaxed);
                return Err(HttpError::ConnectionReadTimeout);
            };
            let (response, io) = sent?;
            let response = response.map(move |body| {
                let limited =
                    Limited::new(body, max).map_err(move |e| match e.downcast::<HttpError>() {
                        Ok(e) => *e,
                        Err(_) => {
                            violations
                                .push(format!("a response body went over the {max}-byte cap"));
                            HttpError::HttpResponseBodySize(Some(max as u64))
                        }
                    });
                Deadlined {
                    body: limited,
                    deadline,
                    timer: None,
                    past,
                }
                .boxed_unsync()
            });
            Ok((
                response,
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

/// A response body that fails when the call's deadline passes, however slowly the server
/// trickles bytes (each within the between-bytes timeout).
struct Deadlined<B> {
    body: B,
    deadline: Instant,
    /// Made on the first poll, inside the runtime that drives the body.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    past: Arc<AtomicBool>,
}

impl<B: Body<Error = HttpError> + Unpin> Body for Deadlined<B> {
    type Data = B::Data;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, HttpError>>> {
        let deadline = self.deadline;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
        if timer.as_mut().poll(cx).is_ready() {
            self.past.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout)));
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The guest's timeouts, each at most [`REQUEST_TIMEOUT`] and at most what is left of the call.
fn bounded(options: Option<RequestOptions>, deadline: Instant) -> RequestOptions {
    let o = options.unwrap_or_default();
    let most = REQUEST_TIMEOUT.min(deadline.saturating_duration_since(Instant::now()));
    let cap = |t: Option<Duration>| Some(t.unwrap_or(most).min(most));
    RequestOptions {
        connect_timeout: cap(o.connect_timeout),
        first_byte_timeout: cap(o.first_byte_timeout),
        between_bytes_timeout: cap(o.between_bytes_timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_exactly_and_bare_hosts_only_on_default_ports() {
        let p = HttpPolicy::new(vec!["a.example".into(), "127.0.0.1:8080".into()]);
        assert!(p.allows("a.example", 443));
        assert!(p.allows("a.example", 80));
        assert!(!p.allows("a.example", 8443));
        assert!(!p.allows("b.a.example", 443));
        assert!(p.allows("127.0.0.1", 8080));
        assert!(!p.allows("127.0.0.1", 8081));
        assert!(!p.allows("localhost", 8080));
    }
}
