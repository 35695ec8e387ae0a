//! Shared set-up: a small project with a scripted model, a runtime over a
//! temporary state folder, and helpers to wait for events.

mod admission;
mod core;
mod cron;
mod sessions;
mod shared_kv;
mod two_hosts;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentkit_protocol::{Event, EventType};
use agentkit_runtime::{AgentRuntime, Owner, RuntimeOptions, SendRequest, SessionMode};

pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) runtime: AgentRuntime,
}

/// Writes a project whose model replays `script` (JSON), and opens a
/// runtime over `<tmp>/state`.
pub(crate) async fn fixture(script: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("bot");
    write(
        &project.join("agent/agent.toml"),
        "model = \"scripted:script.json\"\n",
    );
    write(&project.join("agent/script.json"), script);
    write(
        &project.join("agent/instructions.md"),
        "You are a test agent.\n",
    );
    write(
        &project.join("agent/skills/greet.md"),
        "---\ndescription: Use to greet.\n---\nSay hello.\n",
    );
    write(
        &project.join("agent/sandbox/workspace/seed.txt"),
        "seeded\n",
    );
    let runtime = open(dir.path()).await;
    Fixture { dir, runtime }
}

pub(crate) async fn open(root: &Path) -> AgentRuntime {
    let found = agentkit_manifest::discover(&root.join("bot")).unwrap();
    assert!(found.is_ok(), "{:?}", found.diagnostics);
    let agent = Arc::new(found.host.agents[0].agent.clone());
    AgentRuntime::open(
        agent,
        RuntimeOptions {
            state_dir: root.join("state"),
            default_model: None,
            store: Default::default(),
            providers: Default::default(),
            host_bridge: None,
            clock: Arc::new(agentkit_runtime::SystemClock),
            tool_sources: Vec::new(),
            services: None,
            tracing: false,
            shared: None,
        },
    )
    .await
    .unwrap()
}

pub(crate) fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

pub(crate) fn owner(id: &str) -> Owner {
    Owner {
        principal_id: id.to_owned(),
        principal_type: "user".to_owned(),
        authenticator: "test".to_owned(),
        ..Default::default()
    }
}

/// A follow-up from alice with the session's current token.
pub(crate) fn follow(message: &str, token: &str) -> agentkit_runtime::FollowUp {
    agentkit_runtime::FollowUp {
        client_tools: Vec::new(),
        owner: owner("alice"),
        message: message.to_owned(),
        continuation_token: Some(token.to_owned()),
        admission: Default::default(),
        workspace_files: Vec::new(),
    }
}

pub(crate) fn new_session(message: &str) -> SendRequest {
    SendRequest {
        client_tools: Vec::new(),
        channel: "http".to_owned(),
        mode: SessionMode::Chat,
        owner: owner("alice"),
        message: message.to_owned(),
        continuation: None,
        title: None,
        purpose: None,
        admission: Default::default(),
        workspace_files: Vec::new(),
        dry_run: false,
        as_of: None,
        output_schema: None,
    }
}

/// Follows the session from index 0 until the `n`th event of type `t`,
/// returning everything seen. Fails after 10 s.
pub(crate) async fn until(rt: &AgentRuntime, id: &str, t: EventType, n: usize) -> Vec<Event> {
    let mut sub = rt.subscribe(id, &owner("alice"), 0).await.unwrap();
    let mut seen = Vec::new();
    let mut count = 0;
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let e = sub.next().await.unwrap();
            let hit = e.event_type == t;
            seen.push(e);
            if hit {
                count += 1;
                if count == n {
                    break;
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {t} #{n}; saw {:?}", types(&seen)));
    seen
}

/// Event types, with the turn-failure reason when there is one.
pub(crate) fn types(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e.event_type {
            EventType::TurnFailed => format!(
                "turn.failed({})",
                e.data["reason"]
                    .as_str()
                    .unwrap_or(e.data["message"].as_str().unwrap_or(""))
            ),
            EventType::MessageReceived => format!(
                "message.received({})",
                e.data["text"].as_str().unwrap_or("")
            ),
            t => t.as_str().to_owned(),
        })
        .collect()
}

/// The first page of sessions, as large as one page may be.
fn page() -> agentkit_runtime::SessionPage {
    agentkit_runtime::SessionPage {
        limit: 1000,
        ..Default::default()
    }
}

/// Waits until `state/sessions` holds `n` folders: a new session's folder
/// is moved there from its spare in the background (at most 5 s).
pub(crate) async fn folders(state: &std::path::Path, n: usize) -> usize {
    let count = || std::fs::read_dir(state.join("sessions")).map_or(0, |d| d.count());
    for _ in 0..500 {
        if count() >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    count()
}
