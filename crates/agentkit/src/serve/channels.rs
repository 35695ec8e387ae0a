//! Custom channels on the HTTP surface: builds each agent's channel
//! definitions (declarative webhooks, the GitHub, GitLab, Bitbucket and
//! Slack packs) on the channel API, implements the API's [`SessionHost`] over the agent runtime, and
//! mounts `/v1/channels/<id>[/<path>]` for them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use agentkit_auth::{Policy, Surface};
use agentkit_channels::{
    ApprovalDecision, ChannelDefinition, ChannelHost, ChannelHostOptions, ChannelRequest,
    ChannelSession, GithubOptions, HandlerOutput, ResolvedApproval, SendRequest, SessionHost,
    SessionInfo,
};
use agentkit_manifest::{ChannelKind, Project};
use agentkit_protocol::{Event, SessionId};
use agentkit_runtime::{AgentRuntime, Owner, SessionMode};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};

use super::auth::default_chain;
use super::http::{ApiError, body_error};
use super::options::{AuthDefaults, EnvLookup};
use crate::error::{Error, Result};

/// [`SessionHost`] over one agent's runtime.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeHost {
    runtime: AgentRuntime,
    /// The agent's `HostServices`, for `ChannelContext::services`.
    services: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

pub(crate) fn channel_error(e: agentkit_runtime::Error) -> agentkit_channels::Error {
    let details = match &e {
        agentkit_runtime::Error::UnknownTool { available, .. } => json!({"available": available})
            .as_object()
            .cloned()
            .map(Box::new),
        agentkit_runtime::Error::InvalidInput { errors, .. } => {
            json!({"errors": errors}).as_object().cloned().map(Box::new)
        }
        _ => None,
    };
    if e.status() >= 500 {
        tracing::error!(error = %e, "channel session request failed");
    }
    agentkit_channels::Error::Session {
        status: e.status(),
        code: e.code(),
        message: if e.status() >= 500 {
            "internal error; see the server log".into()
        } else {
            e.to_string()
        },
        details,
    }
}

impl RuntimeHost {
    async fn owner_of(&self, id: &str) -> agentkit_channels::Result<Owner> {
        self.runtime
            .session_meta(id)
            .await
            .map(|m| m.owner)
            .map_err(channel_error)
    }
}

impl SessionHost for RuntimeHost {
    fn send(
        &self,
        channel: &str,
        req: SendRequest,
    ) -> BoxFuture<'_, agentkit_channels::Result<ChannelSession>> {
        let channel = channel.to_owned();
        Box::pin(async move {
            let o = req.options;
            // One create-or-continue for every entry point: a channel key
            // continues its session whoever sends (the channel
            // authenticated the sender), as the principal that started it.
            let accepted = self
                .runtime
                .send(agentkit_runtime::SendRequest {
                    client_tools: Vec::new(),
                    channel: channel.clone(),
                    mode: SessionMode::Chat,
                    owner: Owner::from_auth(&req.auth),
                    message: req.message,
                    continuation: o.continuation_token.clone(),
                    title: o.title,
                    purpose: o.purpose,
                    admission: o.admission,
                    workspace_files: o.workspace_files,
                    dry_run: o.dry_run,
                    as_of: o.as_of,
                    output_schema: o.output_schema,
                })
                .await
                .map_err(channel_error)?;
            let start_index = accepted.start_index;
            Ok(ChannelSession {
                id: accepted.session_id,
                continuation_token: accepted.continuation_token,
                is_new: accepted.is_new,
                coalesced: accepted.coalesced,
                start_index: if accepted.is_new { 0 } else { start_index },
                reply: None,
            })
        })
    }

    fn session(&self, id: &str) -> BoxFuture<'_, Option<SessionInfo>> {
        let id = id.to_owned();
        Box::pin(async move {
            self.runtime
                .session_meta(&id)
                .await
                .ok()
                .map(|m| SessionInfo {
                    id: m.id,
                    channel: m.channel,
                    continuation_token: m.continuation_token,
                    principal_id: m.owner.principal_id,
                    created_at: m.created_at,
                    title: m.title,
                })
        })
    }

    fn session_for(&self, channel: &str, key: &str) -> BoxFuture<'_, Option<String>> {
        let (channel, key) = (channel.to_owned(), key.to_owned());
        Box::pin(async move { self.runtime.session_for(&channel, &key).await })
    }

    fn is_busy(&self, id: &str) -> bool {
        self.runtime.is_busy(id)
    }

    fn interrupt(&self, id: &str) -> BoxFuture<'_, agentkit_channels::Result<bool>> {
        let id = id.to_owned();
        Box::pin(async move {
            let owner = self.owner_of(&id).await?;
            self.runtime.stop(&id, &owner).await.map_err(channel_error)
        })
    }

    fn call_tool(
        &self,
        name: &str,
        input: Value,
        session: Option<&str>,
    ) -> BoxFuture<'_, agentkit_channels::Result<Value>> {
        let (name, session) = (name.to_owned(), session.map(str::to_owned));
        Box::pin(async move {
            let owner = match &session {
                Some(id) => Some(self.owner_of(id).await?),
                None => None,
            };
            let at = session.as_deref().zip(owner.as_ref());
            let outcome = self
                .runtime
                .tool_calls()
                .call(&name, input, at)
                .await
                .map_err(channel_error)?;
            Ok(serde_json::to_value(&outcome).unwrap_or(Value::Null))
        })
    }

    fn follow(
        &self,
        id: &str,
        start_index: u64,
    ) -> BoxFuture<'_, agentkit_channels::Result<BoxStream<'static, Event>>> {
        let id = id.to_owned();
        Box::pin(async move {
            let sid = SessionId::parse(&id).map_err(|e| agentkit_channels::Error::BadRequest {
                message: e.to_string(),
            })?;
            let sub = self
                .runtime
                .store()
                .subscribe(&sid, start_index)
                .await
                .map_err(channel_error)?;
            let stream = futures_util::stream::unfold(sub, |mut sub| async move {
                match sub.next().await {
                    Ok(e) => Some((e, sub)),
                    Err(_) => None,
                }
            });
            Ok(Box::pin(stream) as BoxStream<'static, Event>)
        })
    }

    fn tap(&self) -> tokio::sync::broadcast::Receiver<Arc<Event>> {
        self.runtime.store().tap()
    }

    fn resolve_approval(
        &self,
        id: &str,
        call_id: &str,
        decision: ApprovalDecision,
        by: &str,
    ) -> BoxFuture<'_, agentkit_channels::Result<ResolvedApproval>> {
        let (id, call_id, by) = (id.to_owned(), call_id.to_owned(), by.to_owned());
        Box::pin(async move {
            let owner = self.owner_of(&id).await?;
            let decision = agentkit_runtime::Decision {
                approved: decision.approve,
                reason: decision.reason,
                by,
            };
            let r = self
                .runtime
                .approvals()
                .resolve(&id, &call_id, decision, &owner)
                .await
                .map_err(channel_error)?;
            Ok(ResolvedApproval {
                call_id: r.call_id,
                decision: r.decision.to_owned(),
                by: r.by,
                resumed: r.resumed,
            })
        })
    }

    fn emit_assistant_message(
        &self,
        id: &str,
        text: &str,
    ) -> BoxFuture<'_, agentkit_channels::Result<String>> {
        let (id, text) = (id.to_owned(), text.to_owned());
        Box::pin(async move {
            self.runtime
                .emit_assistant_message(&id, &text)
                .await
                .map_err(channel_error)
        })
    }

    fn run_handler(
        &self,
        channel: &str,
        label: &str,
        handler: &agentkit_manifest::RouteHandler,
        request: Value,
        auth: &agentkit_auth::AuthContext,
    ) -> BoxFuture<'_, agentkit_channels::Result<HandlerOutput>> {
        let origin = agentkit_harness::CallOrigin {
            channel_id: Some(channel.to_owned()),
            continuation_key: None,
            purpose: None,
            principal: Some(call_principal(auth)),
            schedule: None,
            model_turn: false,
        };
        let (label, command) = (label.to_owned(), handler.command.clone());
        Box::pin(async move {
            let out = self
                .runtime
                .run_command(&label, &command, &request, origin)
                .await;
            Ok(HandlerOutput {
                output: out.output,
                is_error: out.is_error,
            })
        })
    }

    fn services(&self) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        self.services.clone()
    }
}

/// The principal a route admitted, as the host bridge acts for it.
pub(crate) fn call_principal(auth: &agentkit_auth::AuthContext) -> agentkit_harness::CallPrincipal {
    let owner = Owner::from_auth(auth);
    agentkit_harness::CallPrincipal {
        id: owner.principal_id,
        kind: owner.principal_type,
        authenticator: owner.authenticator,
    }
}

/// What mounting an agent's custom channels reads.
pub(crate) struct Setup<'a> {
    /// The lookup the packs read their own `${VAR}` settings with.
    pub(crate) env: &'a EnvLookup,
    pub(crate) dev: bool,
    /// What replaces `local_dev_strict` on channels that author no chain.
    pub(crate) auth: &'a AuthDefaults,
    /// The authored chains by channel id, secrets resolved.
    pub(crate) authored: &'a HashMap<String, Vec<Policy>>,
    /// The embedder's Rust channels, as `(agent slug, channel)`.
    pub(crate) rust: &'a [(String, ChannelDefinition)],
    /// `/<slug>`, or empty in single mode.
    pub(crate) prefix: &'a str,
    /// The host's body limit: the limit of channels that set none.
    pub(crate) body_limit: usize,
    /// The agent's `HostServices`, for `ChannelContext::services`.
    pub(crate) services: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// The delivery ledger hosts share (`--database-url`).
    pub(crate) deliveries: Option<Arc<dyn agentkit_channels::DeliveryLedger>>,
    /// The channels' per-session state hosts share (`--database-url`).
    pub(crate) states: Option<Arc<dyn agentkit_channels::ChannelStates>>,
}

/// Mounts every custom channel of `project`.
pub(crate) async fn start(
    project: &Project,
    runtime: &AgentRuntime,
    setup: Setup<'_>,
) -> Result<ChannelHost> {
    let env = setup.env.clone();
    let state_dir = runtime.state_dir().to_path_buf();
    let deliverer = agentkit_channels::Deliverer::new(state_dir.clone());
    let mut defs = Vec::new();
    for c in &project.agent.channels {
        let authored = setup
            .authored
            .get(&c.id)
            .map(|p| agentkit_auth::Chain::new(p.clone(), Surface::CustomChannel));
        let def = match c.kind {
            ChannelKind::Http => continue,
            ChannelKind::Webhook => {
                agentkit_channels::webhook_channel(c, authored, env.clone(), deliverer.clone())
            }
            ChannelKind::Github
            | ChannelKind::Gitlab
            | ChannelKind::Bitbucket
            | ChannelKind::Slack => {
                let build = match c.kind {
                    ChannelKind::Github => agentkit_channels::github_channel,
                    ChannelKind::Gitlab => agentkit_channels::gitlab_channel,
                    ChannelKind::Slack => agentkit_channels::slack_channel,
                    _ => agentkit_channels::bitbucket_channel,
                };
                let pack = GithubOptions {
                    env: env.clone(),
                    dev: setup.dev,
                    state_dir: state_dir.clone(),
                    agent_dir: project.agent.dir.clone(),
                    deliveries: setup.deliveries.clone(),
                };
                build(c, authored, pack).map_err(|e| Error::Config {
                    message: format!("/{}: {e}", project.slug),
                })?
            }
        };
        defs.push(def);
    }
    for (slug, def) in setup.rust {
        if *slug == project.slug {
            if defs.iter().any(|d: &ChannelDefinition| d.id == def.id) {
                return Err(Error::Config {
                    message: format!("/{slug}: channel `{}` is defined twice", def.id),
                });
            }
            defs.push(def.clone());
        }
    }
    // Every channel reads bodies within a known limit, so a 413 can name
    // it (and `GET /v1/info` shows it). A chain that yields claims (`jwt`,
    // OIDC, a verifier's) names its principal's tenant as the agent's
    // other chains do, so the sessions its routes make carry it.
    let tenant_claim = &project.agent.config.auth.tenant_claim;
    for def in &mut defs {
        def.max_body.get_or_insert(setup.body_limit);
        if let Some(chain) = &mut def.auth
            && chain.tenant_claim.is_none()
        {
            chain.tenant_claim.clone_from(tenant_claim);
        }
    }
    let host: Arc<dyn SessionHost> = Arc::new(RuntimeHost {
        runtime: runtime.clone(),
        services: setup.services,
    });
    ChannelHost::start(
        defs,
        host,
        ChannelHostOptions {
            state_dir,
            prefix: setup.prefix.to_owned(),
            default_chain: default_chain(setup.auth, Surface::CustomChannel)
                .with_tenant_claim(tenant_claim.clone()),
            states: setup.states.clone(),
        },
    )
    .await
    .map_err(|e| Error::Config {
        message: format!("/{}: {e}", project.slug),
    })
}

/// One agent's channels, as their routes see them.
#[derive(Debug, Clone)]
struct Channels {
    host: ChannelHost,
    /// The agent's slug: each channel's delivery rate is its own.
    agent: Arc<str>,
}

/// `/v1/channels/{id}` and `/v1/channels/{id}/{*rest}` for agent `agent`.
pub(crate) fn router(agent: &str, host: ChannelHost) -> Router {
    Router::new()
        .route("/v1/channels/{id}", any(root))
        .route("/v1/channels/{id}/{*rest}", any(nested))
        .with_state(Channels {
            host,
            agent: agent.into(),
        })
}

async fn root(
    State(channels): State<Channels>,
    Path(id): Path<String>,
    req: axum::extract::Request,
) -> Response {
    dispatch(channels, id, String::from("/"), req).await
}

async fn nested(
    State(channels): State<Channels>,
    Path((id, rest)): Path<(String, String)>,
    req: axum::extract::Request,
) -> Response {
    dispatch(channels, id, format!("/{rest}"), req).await
}

async fn dispatch(
    Channels { host, agent }: Channels,
    id: String,
    path: String,
    req: axum::extract::Request,
) -> Response {
    use axum::extract::FromRequest;
    // A channel's deliveries have their own budget (`--channel-rate-limit`),
    // counted before the body is read; an unknown id is answered 404 below
    // and counted nowhere, so made-up ids cannot grow the table.
    if host.kind(&id).is_some()
        && let Some(shares) = req.extensions().get::<Arc<super::limits::FairShares>>()
        && let Err(e) = shares.channel(&agent, &id)
    {
        return ApiError::from(e).into_response();
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let method = req.method().as_str().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let headers: HeaderMap = req.headers().clone();
    let body = match host.max_body(&id) {
        // The channel's limit: its `max_body`, a pack's default, or the
        // host's.
        Some(limit) => match read_limited(req, limit, &id).await {
            Ok(b) => b,
            Err(e) => return e.into_response(),
        },
        None => match Bytes::from_request(req, &()).await {
            Ok(b) => b,
            Err(e) => return body_error(e).into_response(),
        },
    };
    let req = ChannelRequest {
        method,
        path,
        query,
        headers: headers
            .iter()
            .filter_map(|(n, v)| {
                v.to_str()
                    .ok()
                    .map(|v| (n.as_str().to_owned(), v.to_owned()))
            })
            .collect(),
        body: body.to_vec(),
        peer,
    };
    let resp = host.dispatch(&id, req).await;
    let status = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // For `/metrics`: a pack answers a redelivery `{"duplicate": true}`.
    let delivery = super::telemetry::Delivery {
        kind: host.kind(&id).unwrap_or("unknown").to_owned(),
        channel: id,
        duplicate: resp.body.get("duplicate") == Some(&serde_json::Value::Bool(true)),
    };
    let mut out = (status, axum::Json(resp.body)).into_response();
    out.extensions_mut().insert(delivery);
    for (k, v) in resp.headers {
        if let (Ok(k), Ok(v)) = (
            axum::http::HeaderName::from_bytes(k.as_bytes()),
            axum::http::HeaderValue::from_str(&v),
        ) {
            out.headers_mut().insert(k, v);
        }
    }
    out
}

/// The body within `limit` bytes; a larger one is 413 naming the limit
/// and channel `id`, one cut off is 400.
async fn read_limited(
    req: axum::extract::Request,
    limit: usize,
    id: &str,
) -> std::result::Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            agentkit_protocol::ErrorCode::PayloadTooLarge,
            format!(
                "the body is over the {} limit of channel `{id}` (`max_body` in its channel file)",
                human_size(limit)
            ),
        )
    };
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    match http_body_util::Limited::new(req.into_body(), limit)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(ApiError::bad_request(format!(
            "cannot read the request body: {e}"
        ))),
    }
}

/// `25 MiB`, `512 KiB`, `1000 bytes`.
fn human_size(n: usize) -> String {
    const MIB: usize = 1 << 20;
    const KIB: usize = 1 << 10;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}
