//! HTTP glue every route shares: the error answer ([`ApiError`], the one
//! place an error becomes a status and a JSON body), the [`Authed`]
//! extractor that runs an auth chain over the raw body before anything
//! parses it, and JSON request bodies.

use std::net::SocketAddr;

use agentkit_auth::{Chain, RequestParts, Role};
use agentkit_protocol::api::ToolCalled;
use agentkit_protocol::{ErrorBody, ErrorCode};
use agentkit_runtime::Owner;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, FromRequest, MatchedPath};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::roles::Need;

/// An error answer: a status and the protocol's [`ErrorBody`],
/// `{"ok": false, "error": {"code", "message", ...}}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    /// Extra fields of the error object (`available`, `errors`).
    pub(crate) details: Option<serde_json::Map<String, Value>>,
    /// Seconds for the `Retry-After` header of a refusal the caller may
    /// retry (`429`, `503`).
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// The status the error is answered with.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// The same error, answered with `Retry-After: secs` (at least 1).
    pub(crate) fn retry_after(mut self, secs: u64) -> ApiError {
        self.retry_after = Some(secs.max(1));
        self
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }
}

impl From<agentkit_runtime::Error> for ApiError {
    fn from(e: agentkit_runtime::Error) -> ApiError {
        if let Some(resource) = e.exhausted() {
            return exhausted(&e, resource);
        }
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED {
            // The detail (paths, OS errors) goes to the log, not the caller.
            tracing::error!(error = %e, source = ?std::error::Error::source(&e), "request failed");
            return ApiError::new(status, e.code(), "internal error; see the server log");
        }
        let details = match &e {
            agentkit_runtime::Error::UnknownTool { available, .. } => {
                Some(json!({"available": available}))
            }
            agentkit_runtime::Error::InvalidInput { errors, .. } => Some(json!({"errors": errors})),
            _ => None,
        };
        let mut err = ApiError::new(status, e.code(), e.to_string());
        err.details = details.and_then(|d| d.as_object().cloned());
        err
    }
}

/// Seconds a caller is asked to wait when the state volume is full: an
/// operator has to make room, which takes longer than a busy moment.
const STORAGE_FULL_RETRY_AFTER: u64 = 30;

/// The answer to a request the host could not serve for want of a
/// resource of its own (a full state volume, no descriptors left): `507`
/// `storage_full` or `503` `overloaded`, with `Retry-After`, and one log
/// line a second however many requests it refuses.
fn exhausted(e: &agentkit_runtime::Error, resource: agentkit_events::Exhausted) -> ApiError {
    static LOG: std::sync::Mutex<super::every::Every> =
        std::sync::Mutex::new(super::every::Every::new(std::time::Duration::from_secs(1)));
    let due = LOG
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .due();
    if let Some(suppressed) = due {
        // The detail (paths, OS errors) goes to the log, not the caller.
        tracing::error!(error = %e, source = ?std::error::Error::source(e), suppressed, "request refused: the host ran out of a resource");
    }
    match resource {
        agentkit_events::Exhausted::Storage => ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            ErrorCode::StorageFull,
            "the server's state volume is full (no space or no inodes left) and the request \
             was not completed; retry once an operator has made room",
        )
        .retry_after(STORAGE_FULL_RETRY_AFTER),
        agentkit_events::Exhausted::Descriptors => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Overloaded,
            "the server has no file descriptors left; retry shortly",
        )
        .retry_after(1),
    }
}

impl From<super::paging::BadPage> for ApiError {
    fn from(e: super::paging::BadPage) -> ApiError {
        ApiError::bad_request(e.0)
    }
}

impl From<super::limits::Limited> for ApiError {
    fn from(l: super::limits::Limited) -> ApiError {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
            l.message,
        )
        .retry_after(l.wait)
    }
}

/// Counts a request to a route without an auth chain (the host's index,
/// `/v1/agents`, the public `/v1/health`, the playground and the docs)
/// against its client address's fair share.
pub(crate) async fn limit_by_address(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let shares = req
        .extensions()
        .get::<std::sync::Arc<super::limits::FairShares>>();
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    if let (Some(shares), Some(peer)) = (shares, peer)
        && let Err(e) = shares.address(peer)
    {
        return ApiError::from(e).into_response();
    }
    next.run(req).await
}

/// A body that could not be read: too large (413) or cut off (400).
pub(crate) fn body_error(e: BytesRejection) -> ApiError {
    let status = e.status();
    let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
        ErrorCode::PayloadTooLarge
    } else {
        ErrorCode::BadRequest
    };
    ApiError::new(status, code, e.body_text())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body =
            ErrorBody::with_details(self.code, self.message, self.details.unwrap_or_default());
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, axum::http::HeaderValue::from(secs));
        }
        response
    }
}

pub(crate) type ApiResult<T = Response> = Result<T, ApiError>;

/// Route state that carries an auth chain: what [`Authed`] runs.
pub(crate) trait Guarded: Send + Sync {
    fn chain(&self) -> &Chain;
    /// The agent whose chain it is: principals are counted per agent.
    fn agent(&self) -> &str;
    /// The agent's path prefix (`/<slug>`, empty in single mode): what
    /// the role table's paths are relative to.
    fn prefix(&self) -> &str;
    /// Serving with `--dev`: off it, the dev routes answer `404` to
    /// everyone the chain admits, whatever their role.
    fn dev(&self) -> bool;
}

/// A request that the state's auth chain admitted: the caller's principal
/// and the raw body (read within the body limit, checked before parsing).
pub(crate) struct Authed {
    pub(crate) owner: Owner,
    pub(crate) body: Bytes,
    /// The caller's role (already checked against the route's).
    pub(crate) role: Role,
}

impl<S: Guarded> FromRequest<S> for Authed {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        admit_request(req, state).await
    }
}

/// Reads the whole body and runs the state's chain over the request, raw
/// body included, checks the admitted principal's role against the
/// route's row of the role table (`403` below it), then counts the
/// principal against its fair share (`429` past it); answers the
/// principal and the body.
pub(crate) async fn read_authenticated(
    req: axum::extract::Request,
    state: &impl Guarded,
) -> ApiResult<(Owner, Bytes)> {
    let Authed { owner, body, .. } = admit_request(req, state).await?;
    Ok((owner, body))
}

async fn admit_request(req: axum::extract::Request, state: &impl Guarded) -> ApiResult<Authed> {
    let (chain, agent) = (state.chain(), state.agent());
    let (parts, body) = req.into_parts();
    let need = route_need(&parts, state.prefix());
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let shares = parts
        .extensions
        .get::<std::sync::Arc<super::limits::FairShares>>()
        .cloned();
    let headers = parts.headers.clone();
    let method = parts.method.clone();
    let body = Bytes::from_request(axum::extract::Request::from_parts(parts, body), &())
        .await
        .map_err(body_error)?;
    let (owner, role) = authenticate(chain, peer, method.as_str(), &headers, &body).await?;
    let (need, dev_route) = need?;
    if dev_route && !state.dev() {
        return Err(ApiError::not_found("dev routes are served only with --dev"));
    }
    require(role, need)?;
    if let Some(shares) = shares {
        shares.principal(agent, &owner)?;
    }
    Ok(Authed { owner, body, role })
}

/// The role an agent route needs, by its row in the role table, and
/// whether it is a dev route. A route the table lacks is refused (and
/// logged as the bug it is).
fn route_need(parts: &axum::http::request::Parts, prefix: &str) -> ApiResult<(Role, bool)> {
    let matched = parts
        .extensions
        .get::<MatchedPath>()
        .map(MatchedPath::as_str)
        .unwrap_or_default();
    let path = matched.strip_prefix(prefix).unwrap_or(matched);
    let dev_route = path.starts_with("/v1/dev/");
    match super::roles::agent_need(parts.method.as_str(), path) {
        Some(Need::Role(role)) => Ok((role, dev_route)),
        // A public route that reads the chain anyway: anyone it admits.
        Some(Need::Public) => Ok((Role::Viewer, dev_route)),
        None => {
            tracing::error!(method = %parts.method, route = %matched, "the route has no row in the role table (serve/roles.rs): refused");
            Err(forbidden("this route states no role"))
        }
    }
}

/// `403` unless `role` reaches `need`.
pub(crate) fn require(role: Role, need: Role) -> ApiResult<()> {
    if role >= need {
        return Ok(());
    }
    Err(forbidden(format!(
        "this route needs the role `{need}`; the caller is a `{role}`"
    )))
}

fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
}

/// Runs `chain` on the request, raw body included: the caller and its
/// role.
pub(crate) async fn authenticate(
    chain: &Chain,
    peer: Option<std::net::IpAddr>,
    method: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<(Owner, Role)> {
    let ctx = admit_context(chain, peer, method, headers, body).await?;
    Ok((Owner::from_auth(&ctx), ctx.role()))
}

/// Runs `chain` over the request: the admitted context, or `401`.
pub(crate) async fn admit_context(
    chain: &Chain,
    peer: Option<std::net::IpAddr>,
    method: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<agentkit_auth::AuthContext> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let mut parts = RequestParts::new(peer).with_body(body).with_method(method);
    if let Some(host) = host {
        parts = parts.with_host(host);
    }
    for (name, value) in headers {
        parts.headers.push((name.as_str(), value.as_bytes()));
    }
    match chain.admit(&parts).await {
        Ok(ctx) => Ok(ctx),
        Err(denied) => {
            tracing::info!(peer = ?peer, reasons = ?denied.refusals(), "request denied");
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthorized,
                "no auth policy admitted the request",
            ))
        }
    }
}

/// The `limit` and `cursor` of a list route's query; `400` naming what is
/// wrong.
pub(crate) fn list_query(uri: &axum::http::Uri, kind: &str) -> ApiResult<super::paging::PageQuery> {
    let axum::extract::Query(q) =
        axum::extract::Query::<agentkit_protocol::api::PageQuery>::try_from_uri(uri)
            .map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    Ok(super::paging::page_query(
        kind,
        q.limit,
        q.cursor.as_deref(),
    )?)
}

/// A JSON request body; an empty one is refused as not an object.
pub(crate) fn parse_json<T: for<'de> Deserialize<'de>>(body: &[u8]) -> ApiResult<T> {
    if is_blank(body) {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid request body: {e}")))
}

/// An empty (or all-whitespace) body: routes whose fields are all
/// optional read it as `{}`.
pub(crate) fn is_blank(body: &[u8]) -> bool {
    body.iter().all(u8::is_ascii_whitespace)
}

/// A JSON answer with status 200.
pub(crate) fn json_ok(body: impl serde::Serialize) -> Response {
    axum::Json(body).into_response()
}

/// A finished deterministic call as the API answers it.
pub(crate) fn tool_called(outcome: agentkit_runtime::ToolCallOutcome) -> ToolCalled {
    ToolCalled {
        tool_name: outcome.tool_name,
        call_id: outcome.call_id,
        is_error: outcome.is_error,
        result: outcome.result,
        duration_ms: outcome.duration_ms,
        ok: true,
    }
}
