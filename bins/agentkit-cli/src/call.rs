//! `agentkit call`: a deterministic tool call, no model turn, against an
//! ephemeral server for `--dir` or a running one at `--url`.

use std::path::PathBuf;
use std::process::ExitCode;

use agentkit::client::Client;
use anyhow::Context;
use clap::Args;

use crate::boot::{boot, pick_agent, tokio_runtime};

/// The flags of `agentkit call`.
#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// The server tool to call.
    tool: String,
    /// The tool's input, as a JSON object.
    #[arg(long, default_value = "{}", value_name = "JSON")]
    input: String,
    /// The project, or a folder of projects (an ephemeral server is booted).
    #[arg(long, default_value = ".", value_name = "PATH", conflicts_with = "url")]
    dir: PathBuf,
    /// A running agent (or host) instead of an ephemeral server.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The agent, when the folder or host serves several.
    #[arg(long, value_name = "SLUG")]
    agent: Option<String>,
    /// Run inside this session (recorded on its stream); needs --url.
    #[arg(long, value_name = "ID", requires = "url")]
    session: Option<String>,
    /// Bearer token for the server.
    #[arg(long, env = "AGENTKIT_BEARER_TOKEN", hide_env_values = true)]
    bearer_token: Option<String>,
}

/// Prints the envelope; exit 0 when the tool succeeded, 1 when it returned
/// an error result, 2 when the call was refused (unknown tool, bad input).
pub(crate) fn call(args: CallArgs) -> anyhow::Result<ExitCode> {
    let input: serde_json::Value =
        serde_json::from_str(&args.input).context("--input is not valid JSON")?;
    anyhow::ensure!(
        input.is_object(),
        "--input must be a JSON object, such as '{{\"city\": \"NYC\"}}'"
    );
    tokio_runtime()?.block_on(async move {
        let mut server = None;
        let mut _state = None;
        let client = match &args.url {
            Some(url) => {
                Client::resolve(url, args.agent.as_deref(), args.bearer_token.clone()).await?
            }
            None => {
                let state = tempfile::Builder::new()
                    .prefix("agentkit-call-")
                    .tempdir()
                    .context("cannot create a temporary state root")?;
                let handle = boot(&args.dir, state.path(), &[], None).await?;
                _state = Some(state);
                let url = pick_agent(&handle, args.agent.as_deref(), &args.dir);
                server = Some(handle);
                Client::new(&url?, args.bearer_token.clone())
            }
        };
        let result = client
            .call_tool(&args.tool, &input, args.session.as_deref())
            .await;
        if let Some(handle) = server {
            handle.close().await;
        }
        let envelope = result?;
        println!("{}", serde_json::to_string_pretty(&envelope)?);
        Ok(if envelope.is_error {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    })
}

/// The flags of `agentkit openapi`.
#[derive(Debug, Args)]
pub(crate) struct OpenapiArgs {
    /// The project, or a folder of projects.
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
    /// The agent, when the folder holds several.
    #[arg(long, value_name = "SLUG")]
    agent: Option<String>,
}

/// Prints the OpenAPI document of the agent's HTTP API, as an ephemeral
/// server for `--dir` serves it at `/v1/openapi.json`.
pub(crate) fn openapi(args: OpenapiArgs) -> anyhow::Result<ExitCode> {
    tokio_runtime()?.block_on(async move {
        let state = tempfile::Builder::new()
            .prefix("agentkit-openapi-")
            .tempdir()
            .context("cannot create a temporary state root")?;
        let handle = boot(&args.dir, state.path(), &[], None).await?;
        let slugs = handle.slugs();
        let slug = match (args.agent.as_deref(), slugs.as_slice()) {
            (Some(slug), _) => slug.to_owned(),
            (None, [one]) => one.clone(),
            (None, _) => {
                handle.close().await;
                anyhow::bail!(
                    "`{}` holds several agents ({}); choose one with --agent SLUG",
                    args.dir.display(),
                    slugs.join(", ")
                );
            }
        };
        let document = handle.openapi(&slug);
        handle.close().await;
        println!("{}", serde_json::to_string_pretty(&document?)?);
        Ok(ExitCode::SUCCESS)
    })
}
