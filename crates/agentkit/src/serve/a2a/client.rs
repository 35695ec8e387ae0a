//! The A2A client: a remote A2A agent named by an `mcp-connections/`
//! file (`a2a = "<agent card URL>"`) is one tool of the agent's turns,
//! named after the connection. A call fetches the card once (its JSON-RPC
//! interface), then sends `SendStreamingMessage` when the card says
//! `streaming: true` (the remote's status changes and the reply it
//! writes become the call's `action.progress` events) and `SendMessage`
//! otherwise, and waits for the task; a task that needs input comes back
//! to the model as `input-required` with its `taskId`, which the model
//! passes again with its answer. Calls carry the delegation depth
//! (`x-agentkit-hops`) and stop at the hop limit, as peer agents' do.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use super::super::depths::Depths;

/// One remote A2A agent, as the connection file names it (its `${VAR}`s
/// resolved).
#[derive(Debug, Clone)]
pub(crate) struct RemoteAgent {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) card: String,
    pub(crate) headers: Vec<(String, String)>,
    /// `auth = "agent-identity"`: each request carries a token the host
    /// signs for the calling session.
    pub(crate) identity: Option<std::sync::Arc<super::super::identity::AgentIdentity>>,
}

/// Where a request is made from: the delegation depth it carries and the
/// session whose turn makes it (named by an agent-identity token).
#[derive(Debug, Clone, Copy)]
struct At<'a> {
    hops: u32,
    session: Option<&'a str>,
}

/// What a fetched card says the client needs.
#[derive(Debug, Clone)]
struct Card {
    /// The JSON-RPC interface's URL.
    url: String,
    about: String,
    /// `capabilities.streaming`: the call streams.
    streaming: bool,
}

/// How long one call waits for the remote task before it reports it
/// still working (the model can ask again with its `taskId`).
const CALL_WAIT: Duration = Duration::from_secs(300);

/// The agent's remote A2A agents as tools of its turns.
#[derive(Debug)]
pub(crate) struct RemoteAgents {
    agents: Vec<RemoteAgent>,
    depths: Depths,
    max_hops: u32,
    cards: Mutex<HashMap<String, Card>>,
}

impl RemoteAgents {
    pub(crate) fn new(agents: Vec<RemoteAgent>, depths: Depths, max_hops: u32) -> RemoteAgents {
        RemoteAgents {
            agents,
            depths,
            max_hops,
            cards: Mutex::default(),
        }
    }

    fn agent(&self, tool: &str) -> Option<&RemoteAgent> {
        self.agents
            .iter()
            .find(|a| super::super::connection_tools::model_tool_name(&a.name, "a2a") == tool)
    }

    async fn request(
        &self,
        agent: &RemoteAgent,
        method: reqwest::Method,
        url: &str,
        at: At<'_>,
    ) -> Result<reqwest::RequestBuilder, String> {
        let http = agentkit_harness::http_client().map_err(|e| e.to_string())?;
        let mut req = http
            .request(method, url)
            .header("a2a-version", super::card::PROTOCOL_VERSION)
            .header(agentkit_mcp::HOPS_HEADER, at.hops.to_string());
        for (k, v) in &agent.headers {
            req = req.header(k, v);
        }
        if let Some(identity) = &agent.identity {
            req = req.bearer_auth(identity.mint(at.session).await?.token);
        }
        Ok(req)
    }

    /// The remote agent's card (fetched once).
    async fn card(&self, agent: &RemoteAgent, at: At<'_>) -> Result<Card, String> {
        if let Some(card) = self.lock().get(&agent.name) {
            return Ok(card.clone());
        }
        let resp = self
            .request(agent, reqwest::Method::GET, &agent.card, at)
            .await?
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| format!("cannot fetch the agent card {}: {e}", agent.card))?;
        if !resp.status().is_success() {
            return Err(format!(
                "the agent card {} answered HTTP {}",
                agent.card,
                resp.status()
            ));
        }
        let v: Value = resp
            .json()
            .await
            .map_err(|e| format!("the agent card {} is not JSON: {e}", agent.card))?;
        let card = parse_card(&v).ok_or_else(|| {
            format!(
                "the agent card {} names no JSON-RPC interface of A2A 1.x",
                agent.card
            )
        })?;
        self.lock().insert(agent.name.clone(), card.clone());
        Ok(card)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Card>> {
        self.cards.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn rpc(
        &self,
        agent: &RemoteAgent,
        card: &Card,
        at: At<'_>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp = self
            .request(agent, reqwest::Method::POST, &card.url, at)
            .await?
            .timeout(CALL_WAIT + Duration::from_secs(30))
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("A2A `{method}` to {} failed: {e}", card.url))?;
        let status = resp.status();
        let v: Value = resp.json().await.map_err(|e| {
            format!(
                "A2A `{method}` to {} answered HTTP {status}, not JSON: {e}",
                card.url
            )
        })?;
        if let Some(err) = v.get("error") {
            return Err(refused(method, err));
        }
        if !status.is_success() {
            return Err(format!("A2A `{method}` answered HTTP {status}: {v}"));
        }
        Ok(v["result"].clone())
    }

    /// Sends the model's message and waits for the remote task: streamed
    /// when the card says the agent streams (its progress reported to
    /// `progress`), else blocking.
    async fn send(
        &self,
        agent: &RemoteAgent,
        input: &Value,
        at: At<'_>,
        progress: &agentkit_harness::Progress,
    ) -> Result<Value, String> {
        let Some(text) = input["message"].as_str().filter(|t| !t.trim().is_empty()) else {
            return Err("`message` (a non-empty string) is required".to_owned());
        };
        let card = self.card(agent, at).await?;
        let mut message = json!({
            "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        });
        for key in ["contextId", "taskId"] {
            if let Some(v) = input[key].as_str().filter(|v| !v.is_empty()) {
                message[key] = json!(v);
            }
        }
        let params = json!({"message": message});
        let mut task = if card.streaming {
            match self.stream(agent, &card, at, params, progress).await? {
                Streamed::Task(task) => task,
                Streamed::Message(m) => {
                    return Ok(json!({"state": "message", "reply": text_of(&m)}));
                }
            }
        } else {
            let result = self.rpc(agent, &card, at, "SendMessage", params).await?;
            match result.get("task") {
                Some(task) => task.clone(),
                // A bare message is the whole answer.
                None => {
                    return Ok(json!({"state": "message", "reply": text_of(&result["message"])}));
                }
            }
        };
        // A server whose blocking wait ended first: poll until the task
        // ends or needs input.
        let deadline = tokio::time::Instant::now() + CALL_WAIT;
        while matches!(
            task["status"]["state"].as_str(),
            Some("TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING")
        ) && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
            task = self
                .rpc(agent, &card, at, "GetTask", json!({"id": task["id"]}))
                .await?;
        }
        Ok(outcome(&task))
    }
}

/// What a stream answered: the task as its last event left it, or a
/// bare message.
#[derive(Debug)]
enum Streamed {
    Task(Value),
    Message(Value),
}

impl RemoteAgents {
    /// `SendStreamingMessage`: folds the remote's events into its task
    /// until the stream ends (after a terminal or input-required status),
    /// reporting each status change and each piece of reply text to
    /// `progress`.
    async fn stream(
        &self,
        agent: &RemoteAgent,
        card: &Card,
        at: At<'_>,
        params: Value,
        progress: &agentkit_harness::Progress,
    ) -> Result<Streamed, String> {
        use futures_util::StreamExt;

        let method = "SendStreamingMessage";
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp = self
            .request(agent, reqwest::Method::POST, &card.url, at)
            .await?
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .timeout(CALL_WAIT + Duration::from_secs(30))
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("A2A `{method}` to {} failed: {e}", card.url))?;
        let status = resp.status();
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            // An error answered as one JSON-RPC response (or an HTTP one).
            let text = resp.text().await.unwrap_or_default();
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            return Err(match v.get("error") {
                Some(err) => refused(method, err),
                None => format!(
                    "A2A `{method}` to {} answered HTTP {status} without a stream: {}",
                    card.url,
                    text.chars().take(300).collect::<String>()
                ),
            });
        }
        let mut fold = StreamFold::default();
        let mut frames = SseFrames::default();
        let mut bytes = resp.bytes_stream();
        while let Some(chunk) = bytes.next().await {
            let chunk =
                chunk.map_err(|e| format!("the A2A stream from {} broke: {e}", card.url))?;
            for data in frames.push(&chunk) {
                let Ok(v) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                if let Some(err) = v.get("error") {
                    return Err(refused(method, err));
                }
                if let Some(message) = v["result"].get("message") {
                    return Ok(Streamed::Message(message.clone()));
                }
                let (status, delta) = fold.observe(&v["result"]);
                if status.is_some() || delta.is_some() {
                    progress.report(status, delta).await;
                }
                if fold.ended() {
                    return Ok(Streamed::Task(fold.task));
                }
            }
        }
        if fold.task.is_null() {
            return Err(format!(
                "the A2A stream from {} ended before it named a task",
                card.url
            ));
        }
        // The stream ended early: the caller polls the task.
        Ok(Streamed::Task(fold.task))
    }
}

/// A remote's JSON-RPC error, for the model.
fn refused(method: &str, err: &Value) -> String {
    format!(
        "the remote agent refused `{method}`: {} ({})",
        err["message"].as_str().unwrap_or("no message"),
        err["code"]
    )
}

/// Server-sent events split into their `data`, whatever the chunks.
#[derive(Debug, Default)]
struct SseFrames {
    buf: Vec<u8>,
}

impl SseFrames {
    /// The data of each event `chunk` completes (lines end in `\n` or
    /// `\r\n`).
    fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf
            .extend(chunk.iter().copied().filter(|b| *b != b'\r'));
        let mut out = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.buf.drain(..end + 2).collect();
            let event = String::from_utf8_lossy(&event);
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                out.push(data.join("\n"));
            }
        }
        out
    }
}

/// A remote task rebuilt from its stream's events.
#[derive(Debug, Default)]
struct StreamFold {
    task: Value,
    state: String,
}

impl StreamFold {
    /// Folds one `StreamResponse` in; answers the progress it makes: the
    /// new state (with its status message) when it changed, and the reply
    /// text it adds.
    fn observe(&mut self, event: &Value) -> (Option<String>, Option<String>) {
        if let Some(task) = event.get("task") {
            self.task = task.clone();
            return (self.status_change(), None);
        }
        if let Some(update) = event.get("statusUpdate") {
            self.ensure_task(update);
            self.task["status"] = update["status"].clone();
            return (self.status_change(), None);
        }
        if let Some(update) = event.get("artifactUpdate") {
            self.ensure_task(update);
            return (None, self.artifact(update));
        }
        (None, None)
    }

    /// A stream whose first event is an update: the task it is about.
    fn ensure_task(&mut self, update: &Value) {
        if self.task.is_null() {
            self.task = json!({
                "id": update["taskId"],
                "contextId": update["contextId"],
                "status": {"state": "TASK_STATE_WORKING"},
            });
        }
    }

    fn status_change(&mut self) -> Option<String> {
        let state = state_name(&self.task);
        let message = text_of(&self.task["status"]["message"]);
        let line = if message.is_empty() {
            state.clone()
        } else {
            format!("{state}: {message}")
        };
        if line == self.state {
            return None;
        }
        self.state = line.clone();
        Some(line)
    }

    /// Applies an artifact update; the text it adds to the reply.
    fn artifact(&mut self, update: &Value) -> Option<String> {
        let artifact = &update["artifact"];
        let id = artifact["artifactId"].clone();
        let append = update["append"].as_bool().unwrap_or(false);
        if !self.task["artifacts"].is_array() {
            self.task["artifacts"] = json!([]);
        }
        let artifacts = self.task["artifacts"].as_array_mut()?;
        let text = artifact_text(artifact);
        match artifacts.iter_mut().find(|a| a["artifactId"] == id) {
            Some(existing) if append => {
                if let (Some(parts), Some(more)) = (
                    existing["parts"].as_array_mut(),
                    artifact["parts"].as_array(),
                ) {
                    parts.extend(more.iter().cloned());
                }
                Some(text).filter(|t| !t.is_empty())
            }
            Some(existing) => {
                // The whole artifact again (agentkit's last chunk): new
                // text only if it grew past what was streamed.
                let before = artifact_text(existing);
                *existing = artifact.clone();
                text.strip_prefix(before.as_str())
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
            }
            None => {
                artifacts.push(artifact.clone());
                Some(text).filter(|t| !t.is_empty())
            }
        }
    }

    /// Whether the task reached a state the stream ends at.
    fn ended(&self) -> bool {
        !self.task.is_null()
            && !matches!(
                self.task["status"]["state"].as_str(),
                None | Some("TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING")
            )
    }
}

/// A task's state by its short name (`working`, `input-required`, …).
fn state_name(task: &Value) -> String {
    task["status"]["state"]
        .as_str()
        .unwrap_or("TASK_STATE_UNSPECIFIED")
        .trim_start_matches("TASK_STATE_")
        .to_ascii_lowercase()
        .replace('_', "-")
}

/// The JSON-RPC interface of A2A 1.x a card names.
fn parse_card(v: &Value) -> Option<Card> {
    let url = v["supportedInterfaces"].as_array()?.iter().find(|i| {
        i["protocolBinding"] == "JSONRPC"
            && i["protocolVersion"]
                .as_str()
                .is_none_or(|p| p.is_empty() || p.starts_with('1'))
    })?["url"]
        .as_str()?
        .to_owned();
    let name = v["name"].as_str().unwrap_or("a remote agent");
    let description = v["description"].as_str().unwrap_or_default();
    let skills: Vec<&str> = v["skills"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .collect();
    let mut about = format!("{name}: {description}");
    if !skills.is_empty() {
        about.push_str(&format!(" (skills: {})", skills.join(", ")));
    }
    let streaming = v["capabilities"]["streaming"].as_bool().unwrap_or(false);
    Some(Card {
        url,
        about,
        streaming,
    })
}

fn text_of(message: &Value) -> String {
    message["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An artifact's text: its text parts as written (a streamed reply is
/// appended in pieces, one part each).
fn artifact_text(artifact: &Value) -> String {
    artifact["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// What the model reads of a task: its state, ids, and the reply (or
/// what it waits for).
fn outcome(task: &Value) -> Value {
    let state = state_name(task);
    let artifacts: Vec<String> = task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(artifact_text)
        .filter(|t| !t.is_empty())
        .collect();
    let status = text_of(&task["status"]["message"]);
    let reply = if state == "completed" && !artifacts.is_empty() {
        artifacts.join("\n")
    } else {
        status
    };
    let mut out = json!({
        "state": state,
        "contextId": task["contextId"],
        "taskId": task["id"],
        "reply": reply,
    });
    if state == "input-required" {
        out["next"] = json!(
            "the remote agent needs input: call this tool again with `taskId` (and `contextId`) and your answer as `message`"
        );
    }
    out
}

impl agentkit_harness::ExtraTools for RemoteAgents {
    fn list<'a>(
        &'a self,
        session_id: &'a str,
    ) -> agentkit_harness::BoxFuture<'a, Vec<agentkit_harness::ExtraTool>> {
        Box::pin(async move {
            let at = At {
                hops: self.depths.get(session_id) + 1,
                session: Some(session_id),
            };
            let mut out = Vec::new();
            for agent in &self.agents {
                let about = match self.card(agent, at).await {
                    Ok(card) => card.about,
                    Err(e) => {
                        tracing::warn!(connection = %agent.name, error = %e, "A2A agent left out of the turn");
                        continue;
                    }
                };
                let mut description = format!(
                    "Send a message to the remote A2A agent `{}`, {about}",
                    agent.name
                );
                if let Some(d) = &agent.description {
                    description.push_str(&format!(". {d}"));
                }
                description.push_str(". Answers {state, reply, contextId, taskId}; pass `contextId` to continue the conversation, `taskId` to answer a task whose state is `input-required`.");
                out.push(agentkit_harness::ExtraTool {
                    name: super::super::connection_tools::model_tool_name(&agent.name, "a2a"),
                    description,
                    input_schema: json!({
                        "type": "object",
                        "required": ["message"],
                        "properties": {
                            "message": {"type": "string", "description": "what to say to the remote agent"},
                            "contextId": {"type": "string", "description": "continue this conversation (a previous answer's contextId)"},
                            "taskId": {"type": "string", "description": "answer this task that waits for input"},
                        },
                    }),
                    read_only: false,
                });
            }
            out
        })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        input: &'a Value,
        ctx: &'a agentkit_harness::ToolContext,
    ) -> agentkit_harness::BoxFuture<'a, agentkit_harness::ToolOutput> {
        Box::pin(async move {
            let Some(agent) = self.agent(name) else {
                return agentkit_harness::ToolOutput::error(format!("unknown tool `{name}`"));
            };
            let hops = self.depths.get(&ctx.session_id) + 1;
            if hops > self.max_hops {
                return agentkit_harness::ToolOutput::error(format!(
                    "delegation chain too deep: this call would be hop {hops} and the limit is {}; answer without delegating further",
                    self.max_hops
                ));
            }
            tokio::select! {
                _ = ctx.cancel.cancelled() => agentkit_harness::ToolOutput::error("tool call cancelled"),
                r = self.send(agent, input, At { hops, session: Some(&ctx.session_id) }, &ctx.progress) => match r {
                    Ok(out) => {
                        let is_error = matches!(out["state"].as_str(), Some("failed" | "canceled" | "rejected"));
                        agentkit_harness::ToolOutput { output: out, is_error }
                    }
                    Err(e) => agentkit_harness::ToolOutput::error(e),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn server_sent_events_are_split_whatever_the_chunks() {
        let mut frames = SseFrames::default();
        assert!(frames.push(b"data: {\"a\"").is_empty());
        assert_eq!(frames.push(b": 1}\r\n\r\ndata: x\n"), vec!["{\"a\": 1}"]);
        assert_eq!(frames.push(b"data: y\n\n: comment\n\n"), vec!["x\ny"]);
        // A character cut in two by the chunks is whole again.
        let text = "data: caf\u{e9}\n\n".as_bytes();
        assert!(frames.push(&text[..9]).is_empty());
        assert_eq!(frames.push(&text[9..]), vec!["caf\u{e9}"]);
    }

    #[test]
    fn a_stream_folds_into_its_task_and_reports_its_progress() {
        let mut fold = StreamFold::default();
        let task = json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}});
        assert_eq!(fold.observe(&task), (Some("submitted".into()), None));
        let working =
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}});
        assert_eq!(fold.observe(&working), (Some("working".into()), None));
        // The same state again is no progress.
        assert_eq!(fold.observe(&working), (None, None));
        let piece = |text: &str, append: bool| {
            json!({"artifactUpdate": {"taskId": "t", "append": append,
                "artifact": {"artifactId": "reply", "parts": [{"text": text}]}}})
        };
        assert_eq!(
            fold.observe(&piece("Hel", false)),
            (None, Some("Hel".into()))
        );
        assert_eq!(fold.observe(&piece("lo", true)), (None, Some("lo".into())));
        // The whole reply again (as agentkit ends a stream): only what is new.
        assert_eq!(
            fold.observe(&piece("Hello!", false)),
            (None, Some("!".into()))
        );
        assert!(!fold.ended());
        let done = json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED",
            "message": {"parts": [{"text": "done"}]}}}});
        assert_eq!(fold.observe(&done), (Some("completed: done".into()), None));
        assert!(fold.ended());
        let out = outcome(&fold.task);
        assert_eq!(
            (out["state"].as_str(), out["reply"].as_str()),
            (Some("completed"), Some("Hello!"))
        );
    }
}
