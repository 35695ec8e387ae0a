//! The agent card (`/.well-known/agent-card.json` under the agent's
//! prefix): who the agent is, where its two A2A bindings answer, what it
//! can do (its skills, and its tools' descriptions), and how to
//! authenticate (the security schemes its HTTP auth chain admits).

use agentkit_auth::{Chain, Policy};
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
        "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": false},
        "securitySchemes": schemes,
        "securityRequirements": requirements,
        "defaultInputModes": MODES,
        "defaultOutputModes": MODES,
        "skills": skills(agent),
    })
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
