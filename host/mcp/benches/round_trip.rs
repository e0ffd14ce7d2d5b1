//! The cost of one call of apiary's tools: `tools/call` round trips through the MCP server (token
//! check, the SDK's streamable HTTP service, input checks, a backend that answers at once) against
//! the baseline of the same HTTP POST to a bare hyper server on the same loopback, answering the
//! same JSON. Both go through one kept-alive ureq connection, taking turns in rounds so machine
//! load falls on both. Prints p50 and p99 of each and the ratio.
//!
//! `cargo bench -p apiary-mcp --bench round_trip` (`-- N` for N calls a side, default 4000).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiary_mcp::{Backend, Server, ToolCall, ToolError};
use futures_util::future::BoxFuture;
use http_body_util::Full;
use hyper::body::Bytes;
use serde_json::{Value, json};

struct Answer;

impl Backend for Answer {
    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move { Ok(json!({"echo": format!("{call:?}")})) })
    }
}

/// A bare HTTP server answering every POST with a fixed JSON-RPC result.
async fn bare() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
        "text": "{\"echo\":\"Post\"}"}], "isError": false}})
    .to_string();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let body = body.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| {
                    let body = body.clone();
                    async move {
                        let mut res = hyper::Response::new(Full::new(Bytes::from(body)));
                        res.headers_mut().insert(
                            "content-type",
                            hyper::header::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, Infallible>(res)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

fn call(agent: &ureq::Agent, url: &str, token: &str, n: u64) -> Duration {
    let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
        "params": {"name": "post", "arguments": {"text": "@bob count the frames"}}})
    .to_string();
    let t = Instant::now();
    let mut res = agent
        .post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", "2025-06-18")
        .send(body)
        .expect("a round trip");
    let text = res.body_mut().read_to_string().unwrap();
    let took = t.elapsed();
    assert!(text.contains("echo"), "unexpected answer: {text}");
    took
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(4000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (server, bare_addr) = rt.block_on(async {
        let server = Server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        (server, bare().await)
    });
    let grant = server.grant(Arc::new(Answer));
    let mcp_url = format!("http://{}{}", server.addr(), apiary_mcp::PATH);
    let bare_url = format!("http://{bare_addr}/mcp");
    let agent = ureq::Agent::new_with_defaults();
    let (mut mcp, mut base) = (Vec::with_capacity(n), Vec::with_capacity(n));
    // Warm both connections, then alternate in rounds of 100.
    for i in 0..200 {
        call(&agent, &mcp_url, &grant.token, i);
        call(&agent, &bare_url, &grant.token, i);
    }
    let mut i = 0u64;
    while mcp.len() < n {
        for _ in 0..100 {
            i += 1;
            mcp.push(call(&agent, &mcp_url, &grant.token, i));
        }
        for _ in 0..100 {
            i += 1;
            base.push(call(&agent, &bare_url, &grant.token, i));
        }
    }
    mcp.sort();
    base.sort();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "tools/call round trip, {} calls a side (load {})",
        mcp.len(),
        load.trim()
    );
    for (label, v) in [("apiary MCP", &mcp), ("bare HTTP", &base)] {
        println!(
            "  {label:<11} p50 {:>7.1} µs  p99 {:>7.1} µs",
            us(percentile(v, 0.5)),
            us(percentile(v, 0.99))
        );
    }
    println!(
        "  ratio       p50 {:.2}x  p99 {:.2}x (apiary MCP / bare HTTP)",
        us(percentile(&mcp, 0.5)) / us(percentile(&base, 0.5)),
        us(percentile(&mcp, 0.99)) / us(percentile(&base, 0.99))
    );
}
