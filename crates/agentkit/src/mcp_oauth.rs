//! `agentkit mcp login` and `agentkit mcp status`: OAuth for the HTTP MCP
//! connections that set `oauth = true`. Tokens live beside the agent's
//! other state, one file per connection
//! (`<stateRoot>/<slug>/mcp-oauth/<connection>.json`, mode 0600); `serve`
//! reads the same file and refreshes it (`agentkit_mcp::TokenSource`).

use std::path::{Path, PathBuf};

use agentkit_manifest::{Host, Transport};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::serve::EnvLookup;

/// How `login` identifies the client when it does not register dynamically.
pub use agentkit_mcp::OAuthClient;

/// Where a connection's tokens are kept.
pub fn token_file(state_root: &Path, slug: &str, connection: &str) -> PathBuf {
    state_root
        .join(slug)
        .join("mcp-oauth")
        .join(format!("{connection}.json"))
}

/// What `login` needs: the project, which connection, and how `${VAR}`
/// in its URL resolves.
#[derive(Debug, Clone)]
pub struct LoginRequest {
    pub dir: PathBuf,
    /// The agent, when several agents have a connection of that name.
    pub agent: Option<String>,
    pub connection: String,
    /// Defaults to `<project>/.agentkit`, as for `serve`.
    pub state_root: Option<PathBuf>,
    pub env: EnvLookup,
    /// Scopes to ask for on top of the discovered ones (what a server's
    /// `403 insufficient_scope` named).
    pub extra_scope: Option<String>,
}

/// What a login stored.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginOutcome {
    pub agent: String,
    pub connection: String,
    pub issuer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<i64>,
    pub token_file: PathBuf,
}

/// One connection in `agentkit mcp status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionAuth {
    pub agent: String,
    pub connection: String,
    /// `http`, `stdio` or `peer`.
    pub transport: &'static str,
    pub oauth: bool,
    /// The login state of an `oauth = true` connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login: Option<agentkit_mcp::TokenState>,
}

fn discover_valid(dir: &Path) -> Result<agentkit_manifest::Discovery> {
    let found = agentkit_manifest::discover(dir)?;
    if found.diagnostics.has_errors() {
        return Err(Error::Invalid {
            diagnostics: found.diagnostics,
        });
    }
    Ok(found)
}

fn state_root_of(host: &Host, state_root: Option<&Path>) -> PathBuf {
    state_root.map_or_else(|| host.root.join(".agentkit"), Path::to_path_buf)
}

/// Runs the OAuth login of one connection: discovery from the server's
/// metadata, dynamic registration, the browser step (`open` gets the URL
/// to open or print; a loopback listener on 127.0.0.1 catches the
/// redirect), the code exchange; the tokens are stored for `serve`.
pub async fn login(request: &LoginRequest, open: impl FnOnce(&str)) -> Result<LoginOutcome> {
    let found = discover_valid(&request.dir)?;
    let mut matches = found.host.agents.iter().filter_map(|p| {
        let c = p
            .agent
            .mcp_connections
            .iter()
            .find(|c| c.name == request.connection)?;
        (request.agent.as_deref().is_none_or(|a| a == p.slug)).then_some((p, c))
    });
    let Some((project, connection)) = matches.next() else {
        return Err(Error::Config {
            message: format!(
                "no MCP connection `{}`{} in `{}`",
                request.connection,
                request
                    .agent
                    .as_deref()
                    .map(|a| format!(" in agent `{a}`"))
                    .unwrap_or_default(),
                request.dir.display()
            ),
        });
    };
    if let Some((other, _)) = matches.next() {
        return Err(Error::Config {
            message: format!(
                "agents `{}` and `{}` both have a connection `{}`; choose one with --agent",
                project.slug, other.slug, request.connection
            ),
        });
    }
    let Transport::Http { url, .. } = &connection.transport else {
        return Err(Error::Config {
            message: format!(
                "connection `{}` is not an HTTP connection; only `url` connections use OAuth",
                connection.name
            ),
        });
    };
    if !connection.oauth {
        return Err(Error::Config {
            message: format!(
                "connection `{}` does not set `oauth = true` in `{}`",
                connection.name, connection.path
            ),
        });
    }
    let file = token_file(
        &state_root_of(&found.host, request.state_root.as_deref()),
        &project.slug,
        &connection.name,
    );
    let options = agentkit_mcp::LoginOptions {
        connection: connection.name.clone(),
        url: request.env.resolve(url),
        token_file: file.clone(),
        client_name: format!("agentkit ({})", project.slug),
        client: agentkit_mcp::OAuthClient {
            client_id: connection
                .oauth_client
                .client_id
                .as_deref()
                .map(|v| request.env.resolve(v)),
            client_secret: connection
                .oauth_client
                .client_secret
                .as_deref()
                .map(|v| request.env.resolve(v)),
            metadata_url: connection
                .oauth_client
                .metadata_url
                .as_deref()
                .map(|v| request.env.resolve(v)),
        },
        extra_scope: request.extra_scope.clone(),
    };
    let tokens = agentkit_mcp::login(&options, open).await?;
    Ok(LoginOutcome {
        agent: project.slug.clone(),
        connection: connection.name.clone(),
        issuer: tokens.issuer,
        scope: tokens.scope,
        expires_in: agentkit_mcp::token_state(&file).expires_in,
        token_file: file,
    })
}

/// Every MCP connection of the project, with the login state of those
/// that use OAuth. Reads files only; nothing is contacted.
pub fn status(dir: &Path, state_root: Option<&Path>) -> Result<Vec<ConnectionAuth>> {
    let found = discover_valid(dir)?;
    let root = state_root_of(&found.host, state_root);
    Ok(found
        .host
        .agents
        .iter()
        .flat_map(|p| {
            let root = &root;
            p.agent.mcp_connections.iter().map(move |c| ConnectionAuth {
                agent: p.slug.clone(),
                connection: c.name.clone(),
                transport: match c.transport {
                    Transport::Http { .. } => "http",
                    Transport::Stdio { .. } => "stdio",
                    Transport::Peer { .. } => "peer",
                    Transport::A2a { .. } => "a2a",
                },
                oauth: c.oauth,
                login: c
                    .oauth
                    .then(|| agentkit_mcp::token_state(&token_file(root, &p.slug, &c.name))),
            })
        })
        .collect())
}

/// What [`headless_check`] did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadlessCheck {
    pub issuer: String,
    pub tools: Vec<String>,
}

/// The whole client side against one MCP server, with no person in the
/// loop, for the MCP conformance suite's client auth scenarios: login
/// (the "browser" follows the authorization server's redirect to the
/// loopback listener itself), then a connection that lists the tools and
/// calls each one that takes no required arguments, with the stored token.
/// Tokens go under `state_dir`.
pub async fn headless_check(
    url: &str,
    state_dir: &Path,
    client: agentkit_mcp::OAuthClient,
) -> Result<HeadlessCheck> {
    let file = state_dir.join("mcp-oauth/server.json");
    let mut options = agentkit_mcp::LoginOptions {
        connection: "server".into(),
        url: url.to_owned(),
        token_file: file.clone(),
        client_name: "agentkit".into(),
        client,
        extra_scope: None,
    };
    let mut tokens = headless_login(&options).await?;
    let mut step_ups = 0;
    let spec = agentkit_mcp::ConnectionSpec {
        name: "server".into(),
        description: None,
        target: agentkit_mcp::Target::Http {
            url: url.to_owned(),
            headers: Vec::new(),
            peer: false,
            oauth: Some(file),
            identity: None,
        },
    };
    // A `403 insufficient_scope` asks for a token with more scopes: log in
    // again asking for them too, at most MAX_STEP_UPS times in all (a
    // server that keeps refusing does not get an endless loop).
    const MAX_STEP_UPS: u32 = 2;
    let step_up = async |scope: Option<String>,
                         options: &mut agentkit_mcp::LoginOptions,
                         step_ups: &mut u32|
           -> Result<Option<agentkit_mcp::StoredTokens>> {
        if *step_ups >= MAX_STEP_UPS {
            return Ok(None);
        }
        *step_ups += 1;
        options.extra_scope = match (options.extra_scope.take(), scope) {
            (Some(a), Some(b)) => Some(format!("{a} {b}")),
            (a, b) => a.or(b),
        };
        headless_login(options).await.map(Some)
    };
    let open = || {
        agentkit_mcp::Connections::new(vec![spec.clone()], agentkit_mcp::ClientOptions::default())
    };
    let mut connections = open();
    let tools = loop {
        match connections.list_tools("server", 0).await {
            Ok(tools) => break tools,
            Err(agentkit_mcp::ClientError::InsufficientScope { scope, .. }) => {
                connections.close().await;
                match step_up(scope, &mut options, &mut step_ups).await? {
                    Some(t) => tokens = t,
                    None => {
                        return Err(Error::Config {
                            message: format!(
                                "the server still refuses `tools/list` after {MAX_STEP_UPS} scope step-ups"
                            ),
                        });
                    }
                }
                connections = open();
            }
            Err(e) => {
                connections.close().await;
                return Err(Error::Config {
                    message: e.to_string(),
                });
            }
        }
    };
    for tool in &tools {
        let required = tool.input_schema["required"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        if required {
            continue;
        }
        loop {
            let called = connections
                .call_tool("server", &tool.name, serde_json::json!({}), 0)
                .await;
            let Err(agentkit_mcp::ClientError::InsufficientScope { scope, .. }) = called else {
                break;
            };
            connections.close().await;
            let stepped = step_up(scope, &mut options, &mut step_ups).await?;
            connections = open();
            match stepped {
                Some(t) => tokens = t,
                None => break,
            }
        }
    }
    connections.close().await;
    Ok(HeadlessCheck {
        issuer: tokens.issuer,
        tools: tools.into_iter().map(|t| t.name).collect(),
    })
}

/// The client side against one MCP server that asks for no login, for
/// the MCP conformance suite's other client scenarios: a connection (the
/// revision negotiated as for any connection) that lists the tools and
/// calls each one, with arguments made from its input schema (each
/// required property a value of its type).
pub async fn plain_check(url: &str) -> Result<Vec<String>> {
    let spec = agentkit_mcp::ConnectionSpec {
        name: "server".into(),
        description: None,
        target: agentkit_mcp::Target::Http {
            url: url.to_owned(),
            headers: Vec::new(),
            peer: false,
            oauth: None,
            identity: None,
        },
    };
    let connections =
        agentkit_mcp::Connections::new(vec![spec], agentkit_mcp::ClientOptions::default());
    let listed = connections.list_tools("server", 0).await;
    let tools = match listed {
        Ok(tools) => tools,
        Err(e) => {
            connections.close().await;
            return Err(Error::Config {
                message: e.to_string(),
            });
        }
    };
    for tool in &tools {
        let args = arguments_for(&tool.input_schema);
        if let Err(e) = connections.call_tool("server", &tool.name, args, 0).await {
            tracing::warn!(tool = %tool.name, error = %e, "conformance client: a call failed");
        }
    }
    connections.close().await;
    Ok(tools.into_iter().map(|t| t.name).collect())
}

/// Arguments that satisfy a tool's input schema's required properties.
fn arguments_for(schema: &serde_json::Value) -> serde_json::Value {
    let mut args = serde_json::Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        let value = match schema["properties"][name]["type"].as_str() {
            Some("number" | "integer") => serde_json::json!(1),
            Some("boolean") => serde_json::json!(true),
            Some("array") => serde_json::json!([]),
            Some("object") => serde_json::json!({}),
            // Not ASCII, so a value carried in a header is base64-encoded.
            _ => serde_json::json!("conformance ✓"),
        };
        args.insert(name.to_owned(), value);
    }
    serde_json::Value::Object(args)
}

/// A login with no person in the loop: the "browser" follows the
/// authorization server's redirect to the loopback listener itself.
async fn headless_login(
    options: &agentkit_mcp::LoginOptions,
) -> Result<agentkit_mcp::StoredTokens> {
    let tokens = agentkit_mcp::login(options, |auth_url| {
        let auth_url = auth_url.to_owned();
        tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build();
            let Ok(http) = http else { return };
            let Ok(r) = http.get(&auth_url).send().await else {
                tracing::warn!("the authorization endpoint did not answer");
                return;
            };
            let location = r
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            match location {
                Some(to) => {
                    let _ = http.get(&to).send().await;
                }
                None => tracing::warn!(
                    status = r.status().as_u16(),
                    "no redirect from the authorization endpoint"
                ),
            }
        });
    })
    .await?;
    Ok(tokens)
}
