//! Shared helpers: small agent projects in temporary folders, turn inputs,
//! and a runner that collects a turn's step events.

mod anthropic;
mod builtins;
mod loop_limits;
mod openai;
mod provider_http;
mod sandbox;
mod scripted;
mod test_provider;
mod tools;
mod workers;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentkit_harness::{StepEvent, TurnInput, TurnOutcome, run_turn};
use agentkit_manifest::{Agent, ModelSpec, Provider, Severity};
use agentkit_protocol::Message;
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// An agent project written into a temporary folder.
pub(crate) struct TestProject {
    pub(crate) dir: TempDir,
    pub(crate) agent: Arc<Agent>,
}

impl TestProject {
    /// Writes `files` (paths relative to `agent/`) next to a default
    /// `instructions.md`, then discovers the project.
    pub(crate) fn new(files: &[(&str, &str)]) -> TestProject {
        let dir = tempfile::tempdir().unwrap();
        // The folder name is the agent's slug.
        let root = dir.path().join("test-agent");
        let agent_dir = root.join("agent");
        write(
            &agent_dir.join("instructions.md"),
            "You are a test agent.\n",
        );
        for (path, content) in files {
            let path = agent_dir.join(path);
            write(&path, content);
            if path.extension().is_some_and(|e| e == "sh") {
                make_executable(&path);
            }
        }
        let agent = discover_agent(&root);
        TestProject { dir, agent }
    }

    pub(crate) fn input(&self, model: ModelSpec, message: &str) -> TurnInput {
        turn_input(self.agent.clone(), model, self.dir.path(), message)
    }
}

pub(crate) fn discover_agent(path: &Path) -> Arc<Agent> {
    let discovery = agentkit_manifest::discover(path).unwrap();
    let errors: Vec<_> = discovery
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "discovery errors: {errors:#?}");
    Arc::new(discovery.host.agents[0].agent.clone())
}

pub(crate) fn weather_agent() -> Arc<Agent> {
    discover_agent(&PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/agents/weather-agent"
    )))
}

pub(crate) fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

pub(crate) fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub(crate) fn test_model() -> ModelSpec {
    ModelSpec {
        provider: Provider::Test,
        id: String::new(),
        params: serde_json::Map::new(),
        context_window: None,
        max_output_tokens: None,
        pricing: None,
    }
}

pub(crate) fn scripted(file: &str) -> ModelSpec {
    ModelSpec {
        provider: Provider::Scripted,
        id: file.to_owned(),
        params: serde_json::Map::new(),
        context_window: None,
        max_output_tokens: None,
        pricing: None,
    }
}

pub(crate) fn turn_input(
    agent: Arc<Agent>,
    model: ModelSpec,
    workspace: &Path,
    message: &str,
) -> TurnInput {
    TurnInput {
        agent,
        model,
        history: Vec::new(),
        user_messages: vec![message.to_owned()],
        user_images: Vec::new(),
        workspace: workspace.to_path_buf(),
        prepare_workspace: None,
        session_id: "sess-1".into(),
        turn_id: "turn-1".into(),
        cancel: CancellationToken::new(),
        providers: Default::default(),
        dry_run: false,
        host: None,
        reminders: None,
        tools: Vec::new(),
        client_tools: Vec::new(),
        services: None,
        approvals: None,
        as_of: None,
        origin: Default::default(),
        prior_usage: Default::default(),
        day_usage: Default::default(),
        prior_cost_usd: 0.0,
        day_cost_usd: 0.0,
        prior_sizing: Default::default(),
    }
}

/// Runs a turn to its end and returns the outcome with every event.
pub(crate) async fn run(input: TurnInput) -> (TurnOutcome, Vec<StepEvent>) {
    let (tx, mut rx) = mpsc::channel(1024);
    let collect = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    });
    let outcome = tokio::time::timeout(Duration::from_secs(30), run_turn(input, tx))
        .await
        .expect("the turn ended");
    (outcome, collect.await.unwrap())
}

/// One line per event: `type data`, for compact assertions.
pub(crate) fn render(events: &[StepEvent]) -> String {
    events
        .iter()
        .map(|e| format!("{} {}", e.event_type(), e.payload().to_value()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `action.result` events.
pub(crate) fn results(events: &[StepEvent]) -> Vec<(String, serde_json::Value, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            StepEvent::ActionResult {
                tool_name,
                output,
                is_error,
                ..
            } => Some((tool_name.clone(), output.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

pub(crate) fn completed(outcome: &TurnOutcome) -> &str {
    match outcome {
        TurnOutcome::Completed { result, .. } => result,
        other => panic!("expected a completed turn, got {other:?}"),
    }
}

pub(crate) fn user(text: &str) -> Message {
    Message::user(text)
}

/// True while a process exists and is not a zombie.
pub(crate) fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Waits up to `within` for a process to be gone.
pub(crate) async fn gone(pid: u32, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if !is_alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    !is_alive(pid)
}

/// Reads a pid a tool wrote, waiting for the file to appear.
pub(crate) async fn read_pid(path: &Path) -> u32 {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no pid in {}", path.display());
}
