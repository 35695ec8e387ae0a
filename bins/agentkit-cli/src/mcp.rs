//! `agentkit mcp login | status`: argument parsing and output; the work is
//! in `agentkit::mcp_oauth`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use crate::boot::tokio_runtime;

#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Log in to an MCP connection that sets `oauth = true`: discovers its
    /// authorization server, registers, and runs the authorization-code
    /// flow with PKCE in your browser (open the printed URL; the redirect
    /// comes back to a listener on 127.0.0.1). The tokens are stored under
    /// the state root (mode 0600); `serve` refreshes them.
    Login {
        /// The connection (the file stem in `mcp-connections/`).
        connection: String,
        /// The project, or a folder of projects.
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// The agent, when several have a connection of that name.
        #[arg(long, value_name = "SLUG")]
        agent: Option<String>,
        /// Where state lives (default `<dir>/.agentkit`, as for `serve`).
        #[arg(long, value_name = "PATH")]
        state_root: Option<PathBuf>,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
        /// Scopes to ask for on top of those the server advertises (space
        /// separated), for a server that refused a call with
        /// `insufficient_scope`.
        #[arg(long, value_name = "SCOPES")]
        scope: Option<String>,
    },
    /// The client under test of the MCP conformance suite: for its auth
    /// scenarios a headless login, then tools/list (and calls of tools
    /// without required arguments); for the others (`MCP_CONFORMANCE_SCENARIO`
    /// outside `auth/`) tools/list and a call of each tool with arguments
    /// made from its schema. The server URL is the last argument.
    ///
    /// A pre-registered client comes from the suite's context
    /// (`MCP_CONFORMANCE_CONTEXT`: `client_id`, `client_secret`).
    #[command(hide = true)]
    ConformanceClient {
        /// The client's metadata document URL, used as its client id
        /// where the authorization server supports them.
        #[arg(long, value_name = "URL")]
        client_metadata_url: Option<String>,
        url: String,
    },
    /// Show each MCP connection and, for `oauth = true` ones, whether it
    /// is logged in and when its token expires (never the token).
    Status {
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        #[arg(long, value_name = "PATH")]
        state_root: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn mcp(args: McpArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        McpCommand::Login {
            connection,
            dir,
            agent,
            state_root,
            json,
            scope,
        } => {
            let request = agentkit::mcp_oauth::LoginRequest {
                extra_scope: scope,
                dir: dir.clone(),
                agent,
                connection,
                state_root,
                env: agentkit::EnvLookup::process(),
            };
            let outcome = tokio_runtime()?
                .block_on(agentkit::mcp_oauth::login(&request, |url| {
                    // The prompt goes to stderr so `--json` stays one document.
                    let mut err = anstream::stderr();
                    let _ = writeln!(
                        err,
                        "Open this URL in a browser to authorize agentkit:\n\n  {url}\n\nWaiting for the redirect to 127.0.0.1 …"
                    );
                }))
                .with_context(|| format!("cannot log in (in `{}`)", dir.display()))?;
            let mut out = anstream::stdout();
            if json {
                crate::render::json(&mut out, &serde_json::to_value(&outcome)?)?;
            } else {
                writeln!(
                    out,
                    "logged in: {}/{} at {}{}",
                    outcome.agent,
                    outcome.connection,
                    outcome.issuer,
                    outcome
                        .expires_in
                        .map(|s| format!(" (token expires in {s}s; refreshed by `serve`)"))
                        .unwrap_or_default()
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::ConformanceClient {
            url,
            client_metadata_url,
        } => {
            // The suite names the scenario; those outside `auth/` serve
            // without a login.
            let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
            if !scenario.is_empty() && !scenario.starts_with("auth/") {
                let tools = tokio_runtime()?
                    .block_on(agentkit::mcp_oauth::plain_check(&url))
                    .with_context(|| format!("conformance client against {url}"))?;
                crate::render::json(
                    &mut anstream::stdout(),
                    &serde_json::json!({ "tools": tools }),
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            let state = tempfile::tempdir().context("cannot make a temporary folder")?;
            let context: serde_json::Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
                .ok()
                .and_then(|c| serde_json::from_str(&c).ok())
                .unwrap_or_default();
            let text = |key: &str| context[key].as_str().map(str::to_owned);
            let client = agentkit::mcp_oauth::OAuthClient {
                client_id: text("client_id"),
                client_secret: text("client_secret"),
                metadata_url: client_metadata_url,
            };
            let check = tokio_runtime()?
                .block_on(agentkit::mcp_oauth::headless_check(
                    &url,
                    state.path(),
                    client,
                ))
                .with_context(|| format!("conformance client against {url}"))?;
            crate::render::json(&mut anstream::stdout(), &serde_json::to_value(&check)?)?;
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::Status {
            dir,
            state_root,
            json,
        } => {
            let list = agentkit::mcp_oauth::status(&dir, state_root.as_deref())
                .with_context(|| format!("cannot read `{}`", dir.display()))?;
            let mut out = anstream::stdout();
            if json {
                crate::render::json(
                    &mut out,
                    &serde_json::json!({ "connections": serde_json::to_value(&list)? }),
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            if list.is_empty() {
                writeln!(out, "no MCP connections")?;
            }
            for c in &list {
                let login = match &c.login {
                    None => "no OAuth".to_owned(),
                    Some(l) => match (l.state, l.expires_in) {
                        ("logged-out", _) => {
                            format!("not logged in: run `agentkit mcp login {}`", c.connection)
                        }
                        (state, Some(s)) => format!(
                            "{state}, token expires in {s}s{}",
                            if l.refreshable { ", refreshable" } else { "" }
                        ),
                        (state, None) => state.to_owned(),
                    },
                };
                writeln!(
                    out,
                    "{}/{} ({}): {login}",
                    c.agent, c.connection, c.transport
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
