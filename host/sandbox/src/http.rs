//! Outbound HTTP (`wasi:http/outgoing-handler`) for a call. Linked for every component, so what
//! componentize-js imports by default links, but refused unless the call's grants name the
//! request's host: the allow-list is checked per request (a redirect is a new request the guest
//! makes, checked again), a response body is capped, and the request waits at most a deadline.
//! A refusal is recorded ([`Violations`]) so the call fails with an error naming the capability.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::uri::Scheme;
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

/// The per-store HTTP policy: the hosts granted, the response cap, the violations seen.
pub struct HttpPolicy {
    allowed: Vec<String>,
    max_response: usize,
    pub(crate) violations: Violations,
}

impl HttpPolicy {
    pub fn new(allowed: Vec<String>) -> HttpPolicy {
        HttpPolicy {
            allowed,
            max_response: MAX_RESPONSE_BYTES,
            violations: Violations::default(),
        }
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
        let options = bounded(options);
        let max = self.max_response;
        let violations = self.violations.clone();
        Box::new(async move {
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            let response = response.map(move |body| {
                Limited::new(body, max)
                    .map_err(move |e| match e.downcast::<HttpError>() {
                        Ok(e) => *e,
                        Err(_) => {
                            violations
                                .push(format!("a response body went over the {max}-byte cap"));
                            HttpError::HttpResponseBodySize(Some(max as u64))
                        }
                    })
                    .boxed_unsync()
            });
            Ok((
                response,
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

/// The guest's timeouts, each at most [`REQUEST_TIMEOUT`].
fn bounded(options: Option<RequestOptions>) -> RequestOptions {
    let o = options.unwrap_or_default();
    let cap = |t: Option<Duration>| Some(t.unwrap_or(REQUEST_TIMEOUT).min(REQUEST_TIMEOUT));
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
