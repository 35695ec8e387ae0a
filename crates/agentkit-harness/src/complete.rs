//! One model answer outside any session: a system prompt and a user
//! message in, text out, through the same providers (and cassettes) as a
//! turn. The eval runner's LLM judges use it.

use std::path::Path;
use std::sync::Arc;

use agentkit_manifest::{Agent, AgentConfig, HarnessConfig, Instructions, ModelSpec};
use agentkit_protocol::{Message, Usage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::credentials::ProviderConfig;
use crate::providers::{Model, StepRequest, StepSink};

/// What the model answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub usage: Usage,
}

/// Asks `spec` for one answer to `user` under `system`, with no tools.
/// `dir` is where a `scripted:<file>` model's path is relative to.
pub async fn complete(
    spec: &ModelSpec,
    dir: &Path,
    system: &str,
    user: &str,
    providers: &ProviderConfig,
) -> Result<Completion, String> {
    let agent = completion_agent(spec, dir, system);
    let model = Model::for_turn(spec, &agent, 0, providers).await?;
    let conversation = [Message::user(user)];
    let cancel = CancellationToken::new();
    let request = StepRequest {
        agent: &agent,
        conversation: &conversation,
        step: 1,
        turn_id: "complete",
        cancel: &cancel,
        tools: &[],
        as_of: None,
    };
    // The deltas are not wanted: the sink's text is the answer.
    let (tx, mut rx) = mpsc::channel(64);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let mut sink = StepSink::new(&tx);
    let reply = model.step(&request, &mut sink).await;
    let text = sink.finish().await;
    drop(tx);
    let _ = drain.await;
    let reply = reply?;
    if !reply.tool_calls.is_empty() {
        return Err(format!(
            "the model asked for tools ({}) instead of answering",
            reply
                .tool_calls
                .iter()
                .map(|c| c.tool_name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Completion {
        text,
        usage: reply.usage,
    })
}

/// The agent a completion runs as: `system` as its instructions, no
/// tools.
pub(crate) fn completion_agent(spec: &ModelSpec, dir: &Path, system: &str) -> Arc<Agent> {
    Arc::new(Agent {
        dir: dir.to_path_buf(),
        config: AgentConfig {
            model: Some(spec.clone()),
            harness: HarnessConfig {
                builtin_tools: Vec::new(),
                ..HarnessConfig::default()
            },
            ..AgentConfig::default()
        },
        instructions: Some(Instructions {
            files: Vec::new(),
            text: system.to_owned(),
            bytes: system.len(),
        }),
        tools: Vec::new(),
        skills: Vec::new(),
        mcp_connections: Vec::new(),
        subagents: Vec::new(),
        channels: Vec::new(),
        hooks: Vec::new(),
        schedules: Vec::new(),
        experiments: Vec::new(),
        artifacts: None,
        sandbox_files: Vec::new(),
        env_refs: Vec::new(),
    })
}
