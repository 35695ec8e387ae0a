//! The router: the host's own routes (`/`, `/v1/agents`, `/v1/health` in
//! the multi-agent layout) and every mounted agent's routes under its
//! prefix, behind the body limit.

use agentkit_protocol::api::{self as wire, AgentEntry, AgentList};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::Html;
use axum::routing::{any, get, post};
use tokio_util::sync::CancellationToken;

use super::agent::{AgentState, Mounted};
use super::http::{ApiError, json_ok, limit_by_address};
use super::options::Mode;
use super::{api, channels, dev};

pub(crate) fn router(
    agents: &[Mounted],
    mode: Mode,
    body_limit: usize,
    shutdown: CancellationToken,
) -> Router {
    let mut app = Router::new();
    match mode {
        Mode::Single => {
            if let Some(a) = agents.first() {
                app = app.merge(agent_router(
                    a.clone(),
                    Health::Public,
                    shutdown.clone(),
                    body_limit,
                ));
            }
        }
        Mode::Multi => {
            let list = AgentList {
                ok: true,
                agents: agents.iter().map(api::agent_entry).collect(),
            };
            let playground = agents.iter().all(|a| a.playground);
            let page = index_page(&list.agents, playground);
            let host = Router::new()
                .route("/", get(move || async move { Html(page) }))
                .route("/v1/agents", get(move || async move { json_ok(list) }))
                .route(
                    "/v1/health",
                    get(|| async {
                        json_ok(wire::Health {
                            ok: true,
                            slug: None,
                        })
                    }),
                )
                // These run no auth chain: each client address has its share.
                .route_layer(axum::middleware::from_fn(limit_by_address));
            app = app.merge(host);
            for a in agents {
                app = app.nest(
                    &format!("/{}", a.slug),
                    agent_router(
                        a.clone(),
                        Health::Authenticated,
                        shutdown.clone(),
                        body_limit,
                    ),
                );
            }
        }
    }
    app.fallback(|| async { ApiError::not_found("no such route") })
        .layer(DefaultBodyLimit::max(body_limit))
}

/// Who may ask an agent's `/v1/health`. It is the host's liveness probe in
/// single mode (where the agent is at the root), and a load balancer's
/// probe carries no credentials; under `/<slug>` it runs the chain, and
/// the host's own `/v1/health` is the public one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Public,
    Authenticated,
}

fn agent_router(
    agent: Mounted,
    health_auth: Health,
    shutdown: CancellationToken,
    body_limit: usize,
) -> Router {
    let channels = channels::router(&agent.slug, agent.channels.clone());
    let state = AgentState {
        agent: std::sync::Arc::new(agent),
        shutdown,
        body_limit,
    };
    // A message may be multipart with files (`uploads.rs` applies the
    // server's limit to a JSON one).
    let message_limit = DefaultBodyLimit::max(super::uploads::MAX_MULTIPART_BYTES.max(body_limit));
    let health_route = match health_auth {
        Health::Public => {
            get(api::public_health).route_layer(axum::middleware::from_fn(limit_by_address))
        }
        Health::Authenticated => get(api::health),
    };
    Router::new()
        .route("/v1/session", post(api::create).layer(message_limit))
        .route(
            "/v1/session/{id}",
            post(api::follow_up)
                .layer(message_limit)
                .get(api::session_info)
                .delete(super::deletion::delete),
        )
        .route("/v1/session/{id}/stop", post(api::stop))
        .route("/v1/session/{id}/fork", post(api::fork))
        .route("/v1/session/{id}/stream", get(api::stream))
        .route("/v1/session/{id}/events", get(api::events))
        .route("/v1/session/{id}/approvals", get(api::approvals))
        .route(
            "/v1/session/{id}/approvals/{call}",
            post(api::resolve_approval),
        )
        .route(
            "/v1/session/{id}/client-calls",
            get(api::client_calls).post(api::answer_client_calls),
        )
        .route("/v1/tools/{name}", post(api::call_tool))
        .route("/v1/sessions", get(api::list))
        .route("/v1/health", health_route)
        .route("/v1/info", get(api::info))
        .route("/v1/mcp", any(api::mcp))
        .merge(dev::routes())
        .merge(super::context::routes())
        .merge(super::ab::routes())
        .merge(super::artifacts::routes())
        .merge(super::memory::routes())
        .merge(super::files::routes())
        .merge(super::evals::routes())
        .merge(super::a2a::routes())
        .merge(super::openai::routes())
        .merge(super::openapi::routes())
        .merge(super::agui::routes())
        .with_state(state)
        .merge(channels)
}

/// The host's index: each agent linked to its playground (to its
/// `/v1/info` when the playground is off), and the docs.
fn index_page(agents: &[AgentEntry], playground: bool) -> String {
    let mut items = String::new();
    for AgentEntry {
        slug, description, ..
    } in agents
    {
        let d = description.as_deref().map(html_escape).unwrap_or_default();
        let main = if playground { "playground" } else { "v1/info" };
        items.push_str(&format!(
            "<li><a href=\"/{slug}/{main}\"><code>/{slug}</code></a> {d} (<a href=\"/{slug}/v1/info\">info</a>)</li>\n"
        ));
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>agentkit</title></head>\n<body><h1>agentkit</h1>\n<p>{} agent(s) on this host. <a href=\"/docs/\">Docs</a>.</p>\n<ul>\n{items}</ul>\n</body></html>\n",
        agents.len()
    )
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
