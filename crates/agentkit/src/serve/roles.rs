//! The one table of who may call each built-in route: [`AGENT_ROUTES`]
//! (under `/<slug>`) and [`HOST_ROUTES`]. A leaf: `http.rs` checks every
//! authenticated agent route against it ([`agent_need`]: a route missing
//! from the table is refused, so a new route cannot ship without a
//! role), the role walk test calls every row, and
//! `docs/reference/auth.md#roles` is generated from it
//! ([`markdown_table`]; a test fails when the two differ). [`HostGuard`]
//! gives a caller its role on the host's own routes.

use agentkit_auth::Role;

/// What a route asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// No auth chain runs (static pages, discovery, probes).
    Public,
    /// The chain runs; the admitted principal needs at least this role.
    Role(Role),
}

/// One row: the method (`*` for any), the path under the agent's prefix
/// (or the host's root), the need and what the handler checks besides.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RouteNeed {
    pub(crate) method: &'static str,
    pub(crate) path: &'static str,
    pub(crate) need: Need,
    pub(crate) note: &'static str,
}

const fn row(
    method: &'static str,
    path: &'static str,
    role: Role,
    note: &'static str,
) -> RouteNeed {
    RouteNeed {
        method,
        path,
        need: Need::Role(role),
        note,
    }
}

const fn public(method: &'static str, path: &'static str, note: &'static str) -> RouteNeed {
    RouteNeed {
        method,
        path,
        need: Need::Public,
        note,
    }
}

use Role::{Admin, Operator, User, Viewer};

const OWN: &str = "own sessions; an operator any";
const DEV: &str = "under `--dev` only: `404` to everyone otherwise";

/// Every built-in route of an agent, under `/<slug>` (at the root in
/// single mode).
pub(crate) const AGENT_ROUTES: &[RouteNeed] = &[
    row("POST", "/v1/session", User, "starts a session it owns"),
    row("GET", "/v1/session/{id}", Viewer, OWN),
    row("POST", "/v1/session/{id}", User, OWN),
    row("DELETE", "/v1/session/{id}", User, OWN),
    row("POST", "/v1/session/{id}/stop", User, OWN),
    row("POST", "/v1/session/{id}/fork", User, OWN),
    row("GET", "/v1/session/{id}/stream", Viewer, OWN),
    row("GET", "/v1/session/{id}/events", Viewer, OWN),
    row("GET", "/v1/session/{id}/approvals", Viewer, OWN),
    row("POST", "/v1/session/{id}/approvals/{call}", User, OWN),
    row("GET", "/v1/session/{id}/client-calls", Viewer, OWN),
    row("POST", "/v1/session/{id}/client-calls", User, OWN),
    row("POST", "/v1/session/{id}/feedback", User, OWN),
    row("GET", "/v1/session/{id}/artifacts", Viewer, OWN),
    row("GET", "/v1/session/{id}/files", Viewer, OWN),
    row("GET", "/v1/session/{id}/files/{*path}", Viewer, OWN),
    row("PUT", "/v1/session/{id}/files/{*path}", User, OWN),
    row(
        "GET",
        "/v1/session/{id}/context",
        Viewer,
        "own sessions under `--dev`; an operator any, on any host",
    ),
    row(
        "GET",
        "/v1/session/{id}/steps",
        Viewer,
        "own sessions under `--dev`; an operator any, on any host",
    ),
    row(
        "GET",
        "/v1/session/{id}/steps/{step}/request",
        Viewer,
        "own sessions under `--dev`; an operator any, on any host",
    ),
    row(
        "GET",
        "/v1/session/{id}/cassette",
        Viewer,
        "own sessions under `--dev`; an operator any, on any host",
    ),
    row(
        "GET",
        "/v1/sessions",
        Viewer,
        "lists its own; an operator every session",
    ),
    row(
        "POST",
        "/v1/tools/{name}",
        User,
        "runs a tool outside a session",
    ),
    row(
        "GET",
        "/v1/artifacts",
        Viewer,
        "lists its own; an operator every one",
    ),
    row(
        "GET",
        "/v1/memory",
        Viewer,
        "its own and the agent's; an operator all",
    ),
    row(
        "GET",
        "/v1/memory/{id}",
        Viewer,
        "its own and the agent's; an operator all",
    ),
    row("PUT", "/v1/memory/{id}", User, "its own; an operator any"),
    row(
        "DELETE",
        "/v1/memory/{id}",
        User,
        "its own; an operator any",
    ),
    row("GET", "/v1/info", Viewer, ""),
    row(
        "GET",
        "/v1/health",
        Viewer,
        "public in single mode (the host's probe)",
    ),
    row("GET", "/v1/openapi.json", Viewer, ""),
    row(
        "GET",
        "/v1/ab",
        Viewer,
        "the agent's experiment report (totals, no content); `admin` on an agent with tenants",
    ),
    row(
        "*",
        "/v1/mcp",
        User,
        "MCP tools start and follow sessions it owns",
    ),
    row(
        "POST",
        "/v1/ag-ui",
        User,
        "starts or follows sessions it owns",
    ),
    row(
        "POST",
        "/v1/responses",
        User,
        "starts or follows sessions it owns",
    ),
    row("GET", "/v1/responses/{id}", Viewer, OWN),
    row(
        "POST",
        "/v1/chat/completions",
        User,
        "starts a session it owns",
    ),
    public("GET", "/.well-known/agent-card.json", "A2A discovery"),
    row("POST", "/a2a", User, "A2A JSON-RPC: tasks it owns"),
    row("POST", "/a2a/message:send", User, "tasks it owns"),
    row("POST", "/a2a/message:stream", User, "tasks it owns"),
    row(
        "GET",
        "/a2a/tasks",
        Viewer,
        "lists its own; an operator every task",
    ),
    row("GET", "/a2a/tasks/{id}", Viewer, OWN),
    row(
        "POST",
        "/a2a/tasks/{id}",
        User,
        "cancel or subscribe: own tasks",
    ),
    row(
        "GET",
        "/a2a/tasks/{id}/pushNotificationConfigs",
        Viewer,
        OWN,
    ),
    row("POST", "/a2a/tasks/{id}/pushNotificationConfigs", User, OWN),
    row(
        "GET",
        "/a2a/tasks/{id}/pushNotificationConfigs/{config}",
        Viewer,
        OWN,
    ),
    row(
        "DELETE",
        "/a2a/tasks/{id}/pushNotificationConfigs/{config}",
        User,
        OWN,
    ),
    row("GET", "/a2a/extendedAgentCard", Viewer, ""),
    row("POST", "/v1/dev/schedules/{id}", Operator, DEV),
    row("GET", "/v1/dev/reminders", Operator, DEV),
    row("POST", "/v1/dev/reminders/{id}", Operator, DEV),
    row("POST", "/v1/dev/evals/cases", Operator, DEV),
    row("GET", "/v1/dev/evals", Operator, DEV),
    row("POST", "/v1/dev/evals", Operator, DEV),
    row("GET", "/v1/dev/evals/{run}", Operator, DEV),
    row("GET", "/v1/dev/sessions/{id}/files/{*path}", Operator, DEV),
];

/// The host's own routes (the agent prefix does not apply).
pub(crate) const HOST_ROUTES: &[RouteNeed] = &[
    public("GET", "/", "the host's index (multi-agent layout)"),
    public("GET", "/v1/agents", "the agents of the host"),
    public("GET", "/v1/health", "the host's liveness probe"),
    public(
        "GET",
        "/.well-known/jwks.json",
        "the agent-identity public keys",
    ),
    public(
        "GET",
        "/<slug>/playground",
        "a static page: its calls run the agent's chain; with OIDC, a browser without a session is sent to `/login` first",
    ),
    public(
        "GET",
        "/login",
        "with OIDC: to the provider (authorization code + PKCE)",
    ),
    public(
        "GET",
        "/login/callback",
        "with OIDC: the provider's answer; sets the session cookie",
    ),
    public(
        "GET",
        "/logout",
        "with OIDC: ends the session (also `POST`), and at the provider when it has an end-session endpoint",
    ),
    public(
        "GET",
        "/logout/callback",
        "with OIDC: back from the provider's end-session endpoint",
    ),
    public("GET", "/playground/assets/{file}", "static files"),
    public("GET", "/docs/{*rest}", "static files"),
    row(
        "GET",
        "/metrics",
        Operator,
        "the host chain (the default chain of channels that author none), the caller's lowest role on the host's agents; public with `--metrics-public`",
    ),
    row(
        "GET",
        "/v1/logs",
        Admin,
        "the host chain; its lines name sessions and principals of every agent and tenant",
    ),
];

/// Who is who on the host routes: the host chain, and every agent's
/// `[auth.roles]`. Host-wide figures name every agent, so a caller's
/// role on the host is the lowest it holds on the host's agents: an
/// operator of one agent only is not one of the host. The operator
/// token's holder and the `--dev` loopback caller are `admin`.
#[derive(Debug, Clone)]
pub(crate) struct HostGuard {
    pub(crate) chain: agentkit_auth::Chain,
    pub(crate) agents: Vec<agentkit_auth::RoleMap>,
}

impl HostGuard {
    /// The role on the host of a principal its chain admitted.
    pub(crate) fn role_of(&self, ctx: &agentkit_auth::AuthContext) -> Role {
        // The host chain maps no roles of its own: `admin` here comes
        // from the operators (the token, the loopback caller).
        if ctx.role() == Role::Admin {
            return Role::Admin;
        }
        let floor = if ctx.is_operator() {
            Role::Operator
        } else {
            Role::Viewer
        };
        self.agents
            .iter()
            .map(|map| map.role_of(ctx).max(floor))
            .min()
            .unwrap_or_else(|| ctx.role())
    }
}

/// The need of an agent route by its method and matched path (without
/// the agent's prefix); `None` for a route the table lacks.
pub(crate) fn agent_need(method: &str, path: &str) -> Option<Need> {
    AGENT_ROUTES
        .iter()
        .find(|r| r.path == path && (r.method == "*" || r.method == method))
        .map(|r| r.need)
}

/// The need of a host route by its path.
pub(crate) fn host_need(path: &str) -> Option<Need> {
    HOST_ROUTES.iter().find(|r| r.path == path).map(|r| r.need)
}

/// The role table of `docs/reference/auth.md#roles`.
pub fn markdown_table() -> String {
    let mut out = String::from("| method | route | needs | besides |\n|---|---|---|---|\n");
    let rows = AGENT_ROUTES
        .iter()
        .map(|r| (r, "/<slug>"))
        .chain(HOST_ROUTES.iter().map(|r| (r, "")));
    for (r, prefix) in rows {
        let need = match r.need {
            Need::Public => "public".to_owned(),
            Need::Role(role) => format!("`{role}`"),
        };
        let method = if r.method == "*" { "any" } else { r.method };
        out.push_str(&format!(
            "| {method} | `{prefix}{}` | {need} | {} |\n",
            r.path, r.note
        ));
    }
    out
}
