//! The listener: HTTP/1.1 connections (bounded in number and in how long a request head may take),
//! the bearer token checked before anything else, then the SDK's streamable HTTP service with the
//! session's backend in the request's extensions, where [`Handler`] finds it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tower_service::Service as _;

use super::{Backend, PATH, Sessions, digest, lock, tools};

/// A request body larger than this is refused (413): the largest tool input is a 16 KiB post.
const BODY_MAX: usize = 256 * 1024;
/// Connections open at once; more wait in the kernel's backlog.
const CONNECTIONS_MAX: usize = 256;
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

type Body = BoxBody<Bytes, Infallible>;
type Mcp = StreamableHttpService<Handler, NeverSessionManager>;

/// The backend a request's token was granted for.
#[derive(Clone)]
struct Session(Arc<dyn Backend>);

pub(crate) async fn serve(listener: TcpListener, sessions: Arc<Sessions>) {
    let mut config = StreamableHttpServerConfig::default();
    // Stateless, answering in JSON: each POST stands alone, so nothing is kept per client and a
    // restarted agent needs no session of ours to resume.
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    config.max_request_body_bytes = BODY_MAX;
    let mcp: Mcp = StreamableHttpService::new(
        || Ok(Handler),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (mcp, sessions) = (mcp.clone(), Arc::clone(&sessions));
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                answer(req, mcp.clone(), Arc::clone(&sessions))
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!("MCP connection ended: {e}");
            }
            drop(permit);
        });
    }
}

async fn answer(
    mut req: Request<Incoming>,
    mut mcp: Mcp,
    sessions: Arc<Sessions>,
) -> Result<Response<Body>, Infallible> {
    if req.uri().path() != PATH {
        return Ok(plain(
            StatusCode::NOT_FOUND,
            "not found: apiary's MCP server is at /mcp",
        ));
    }
    let backend = bearer(&req).and_then(|token| lock(&sessions).get(&digest(token)).cloned());
    let Some(backend) = backend else {
        let mut res = plain(StatusCode::UNAUTHORIZED, "a session token is required");
        res.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return Ok(res);
    };
    req.extensions_mut().insert(Session(backend));
    mcp.call(req).await
}

fn bearer<B>(req: &Request<B>) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut res = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *res.status_mut() = status;
    res
}

/// The SDK's side: the server's description, the tool list, and each call checked, then handed to
/// the session's backend.
#[derive(Clone)]
pub(crate) struct Handler;

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("apiary", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "apiary's tools: read the thread and channels you are in, post as yourself, and \
                 hand work to other personas by mentioning them with @name.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::listed()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let backend = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Session>())
            .map(|s| Arc::clone(&s.0))
            .ok_or_else(|| ErrorData::internal_error("no session for this request", None))?;
        let call = match tools::parse(&request.name, request.arguments) {
            Ok(Some(call)) => call,
            Ok(None) => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named `{}`", request.name),
                    None,
                ));
            }
            Err(refused) => return Ok(refusal(refused).into()),
        };
        Ok(match backend.call(call).await {
            Ok(value) => CallToolResult::structured(value),
            Err(refused) => refusal(refused),
        }
        .into())
    }
}

fn refusal(e: tools::ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.0)])
}
