//! Outbound HTTP (`wasi:http/outgoing-handler`) for a call. Linked for every component, so what
//! componentize-js imports by default links, but refused unless the call's grants name the
//! request's host: the allow-list is checked per request (a redirect is a new request the guest
//! makes, checked again), a response body is capped, and the request waits at most a deadline.
//! A refusal is recorded ([`Violations`]) so the call fails with an error naming the capability.
//!
//! Grants are matched on what a host *is*, not how it is spelt: numeric hosts are normalised
//! (`2130706433`, `0x7f.1` and `127.1` are 127.0.0.1), a granted name is resolved here and its
//! addresses that are not the public internet (loopback, private, link-local, CGNAT, multicast,
//! the metadata service) are refused unless a grant names that address, and the request connects
//! to the addresses that were checked, never resolving the name a second time ([`grants`]).
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

pub(crate) use apiary_addr as address;
mod grants;
mod pinned;

use address::Host;
use grants::Grants;
pub(crate) use grants::split_host_port;

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
    grants: Arc<Grants>,
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
            grants: Arc::new(Grants::parse(&allowed)),
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
        let tls = uri.scheme() == Some(&Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let written = uri.host().unwrap_or("");
        let host = match Host::parse(written) {
            Ok(host) if self.grants.allows(&host, port) => host,
            Ok(host) => {
                self.violations
                    .push(format!("capability http:{host}:{port} is not granted"));
                return Box::new(async { Err(HttpError::HttpRequestDenied) });
            }
            Err(_) => {
                self.violations
                    .push(format!("`{written}` is neither a host name nor an address"));
                return Box::new(async { Err(HttpError::HttpRequestUriInvalid) });
            }
        };
        let deadline = self
            .deadline
            .unwrap_or_else(|| Instant::now() + REQUEST_TIMEOUT);
        let options = bounded(options, deadline);
        let max = self.max_response;
        let violations = self.violations.clone();
        let past = self.past_deadline.clone();
        let grants = Arc::clone(&self.grants);
        Box::new(async move {
            let send = async {
                let target = grants.target(&host, port, tls).await.map_err(|why| {
                    violations.push(format!("capability http:{host}:{port}: {why}"));
                    HttpError::DestinationIpProhibited
                })?;
                pinned::send(request, options, target).await
            };
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
                io as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
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
