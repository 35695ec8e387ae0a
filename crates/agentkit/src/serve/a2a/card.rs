//! The agent card (`/.well-known/agent-card.json` under the agent's
//! prefix): who the agent is, where its two A2A bindings answer, what it
//! can do (its skills, and its tools' descriptions), and how to
//! authenticate (the security schemes its HTTP auth chain admits). The
//! extended card (`GetExtendedAgentCard`), for callers the chain
//! authenticates, adds what the public card keeps to itself: the
//! subagents and connections the agent delegates to, and which tools
//! wait for an approval.

use agentkit_auth::{Chain, Policy};
use agentkit_manifest::{Approval, Transport};
use axum::http::HeaderMap;
use serde_json::{Map, Value, json};

use super::super::agent::Mounted;

/// The A2A protocol version this server speaks.
pub(crate) const PROTOCOL_VERSION: &str = "1.0";

/// The media types messages and replies travel as.
const MODES: [&str; 2] = ["text/plain", "application/json"];

/// Where the request came to this host: `http(s)://<Host>`.
pub(crate) fn base_url(headers: &HeaderMap) -> String {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(',').next().unwrap_or(v).trim().to_owned())
    };
    let host = header("x-forwarded-host")
        .or_else(|| header("host"))
        .unwrap_or_else(|| "localhost".to_owned());
    let scheme = match header("x-forwarded-proto").as_deref() {
        Some("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}")
}

/// The card of `agent`, whose endpoints are under `base`.
pub(crate) fn card(agent: &Mounted, base: &str) -> Value {
    let config = &agent.project.agent.config;
    let url = format!("{base}{}/a2a", agent.prefix);
    let (schemes, requirements) = security(&agent.chain);
    json!({
        "name": config.name.clone().unwrap_or_else(|| agent.slug.clone()),
        "description": config
            .description
            .clone()
            .unwrap_or_else(|| format!("The agentkit agent `{}`", agent.slug)),
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": PROTOCOL_VERSION},
        ],
        "provider": {"organization": "agentkit", "url": base},
        "version": env!("CARGO_PKG_VERSION"),
        "documentationUrl": format!("{base}/docs/reference/a2a"),
        "capabilities": {
            "streaming": true,
            "pushNotifications": true,
            "extendedAgentCard": extended_available(&agent.chain),
        },
        "securitySchemes": schemes,
        "securityRequirements": requirements,
        "defaultInputModes": MODES,
        "defaultOutputModes": MODES,
        "skills": skills(agent),
    })
}

/// Whether the chain can authenticate anyone (a policy other than those
/// that admit everyone anonymously): only then is there an extended card.
pub(crate) fn extended_available(chain: &Chain) -> bool {
    chain
        .policies
        .iter()
        .any(|p| !matches!(p, Policy::AllowAll | Policy::PublicEndpoint))
}

/// The extended card of `agent`: the public card, its tools tagged
/// `needs-approval` when a call may wait for one, and a skill per
/// subagent (`subagent:<id>`) and per connection (`connection:<name>`,
/// tagged `mcp`, `peer-agent` or `a2a`) the agent delegates to.
pub(crate) fn extended_card(agent: &Mounted, base: &str) -> Value {
    let mut card = card(agent, base);
    let a = &agent.project.agent;
    let mut skills: Vec<Value> = match card["skills"].take() {
        Value::Array(skills) => skills,
        _ => Vec::new(),
    };
    for skill in &mut skills {
        let name = skill["id"]
            .as_str()
            .and_then(|id| id.strip_prefix("tool:"))
            .map(str::to_owned);
        if let Some(tool) = name.as_deref().and_then(|n| a.tool(n))
            && tool.needs_approval != Approval::Never
            && let Some(tags) = skill["tags"].as_array_mut()
        {
            tags.push(json!("needs-approval"));
        }
    }
    let mut more: Vec<Value> = a
        .subagents
        .iter()
        .map(|s| {
            json!({
                "id": format!("subagent:{}", s.id),
                "name": s.id,
                "description": s.description,
                "tags": ["subagent"],
            })
        })
        .collect();
    more.extend(a.mcp_connections.iter().map(|c| {
        let (tag, what) = match &c.transport {
            Transport::Peer { agent } => {
                ("peer-agent", format!("the agent `{agent}` of this host"))
            }
            Transport::A2a { .. } => ("a2a", format!("the remote A2A agent `{}`", c.name)),
            Transport::Http { .. } | Transport::Stdio { .. } => {
                ("mcp", format!("the tools of the MCP server `{}`", c.name))
            }
        };
        json!({
            "id": format!("connection:{}", c.name),
            "name": c.name,
            "description": c.description.clone().unwrap_or(what),
            "tags": ["connection", tag],
        })
    }));
    // The placeholder `chat` skill stands for nothing once there is more.
    if !more.is_empty() && skills.len() == 1 && skills[0]["id"] == "chat" {
        skills.clear();
    }
    skills.extend(more);
    card["skills"] = Value::Array(skills);
    card
}

/// The agent's skills, then the tools the model may call; a card with
/// neither gets one `chat` skill (the card must name at least one).
fn skills(agent: &Mounted) -> Vec<Value> {
    let a = &agent.project.agent;
    let mut out: Vec<Value> = a
        .skills
        .iter()
        .map(|s| {
            json!({
                "id": format!("skill:{}", s.name),
                "name": s.name,
                "description": s.description,
                "tags": ["skill"],
            })
        })
        .collect();
    out.extend(a.tools.iter().filter(|t| t.offered_to_model()).map(|t| {
        json!({
            "id": format!("tool:{}", t.name),
            "name": t.name,
            "description": t.description,
            "tags": ["tool"],
        })
    }));
    if out.is_empty() {
        out.push(json!({
            "id": "chat",
            "name": "chat",
            "description": a
                .config
                .description
                .clone()
                .unwrap_or_else(|| "Answers messages".to_owned()),
            "tags": ["chat"],
        }));
    }
    out
}

/// The security schemes of the chain's policies that a client can act on
/// (a bearer token, a shared-secret header, a JWT), and one requirement
/// per scheme (any one admits, as the chain's first admitting policy
/// does). A chain that admits anyone requires nothing; loopback-only and
/// signature policies have no A2A scheme and are left out.
fn security(chain: &Chain) -> (Map<String, Value>, Vec<Value>) {
    let mut schemes = Map::new();
    let mut open = false;
    for policy in &chain.policies {
        match policy {
            Policy::AllowAll => open = true,
            Policy::Bearer { .. } => {
                schemes.insert(
                    "bearer".to_owned(),
                    json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "a bearer token the host was configured with"}}),
                );
            }
            Policy::SharedSecret { header, .. } => {
                schemes.insert(
                    format!("header:{}", header.to_ascii_lowercase()),
                    json!({"apiKeySecurityScheme": {"location": "header", "name": header, "description": "a shared secret"}}),
                );
            }
            Policy::Jwt(jwt) => {
                schemes.insert(
                    "jwt".to_owned(),
                    json!({"httpAuthSecurityScheme": {
                        "scheme": "Bearer",
                        "bearerFormat": "JWT",
                        "description": format!("a JWT issued by {}", jwt.config().issuer),
                    }}),
                );
            }
            _ => {}
        }
    }
    let requirements = if open {
        Vec::new()
    } else {
        schemes
            .keys()
            .map(|name| json!({"schemes": {name.clone(): {"list": []}}}))
            .collect()
    };
    (schemes, requirements)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use agentkit_auth::{BearerToken, Surface};

    use super::*;

    #[test]
    fn schemes_follow_the_chain() {
        let chain = Chain::new(
            vec![
                Policy::LocalDevStrict,
                Policy::Bearer {
                    tokens: vec![BearerToken::new("t", "p")],
                },
            ],
            Surface::BuiltinApi,
        );
        let (schemes, reqs) = security(&chain);
        assert_eq!(
            schemes["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        assert_eq!(reqs, vec![json!({"schemes": {"bearer": {"list": []}}})]);
        let open = Chain::new(
            vec![Policy::AllowAll, Policy::Bearer { tokens: vec![] }],
            Surface::BuiltinApi,
        );
        assert!(security(&open).1.is_empty());
        let mut headers = HeaderMap::new();
        headers.insert("host", "example.test:8080".parse().unwrap());
        assert_eq!(base_url(&headers), "http://example.test:8080");
        headers.insert("x-forwarded-proto", "https".parse().unwrap());
        assert_eq!(base_url(&headers), "https://example.test:8080");
    }
}
