//! The A2A client: a remote A2A agent named by an `mcp-connections/`
//! file (`a2a = "<agent card URL>"`) is one tool of the agent's turns,
//! named after the connection. A call fetches the card once (its JSON-RPC
//! interface), sends `SendMessage` and waits for the task; a task that
//! needs input comes back to the model as `input-required` with its
//! `taskId`, which the model passes again with its answer. Calls carry
//! the delegation depth (`x-agentkit-hops`) and stop at the hop limit,
//! as peer agents' do.

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
            return Err(format!(
                "the remote agent refused `{method}`: {} ({})",
                err["message"].as_str().unwrap_or("no message"),
                err["code"]
            ));
        }
        if !status.is_success() {
            return Err(format!("A2A `{method}` answered HTTP {status}: {v}"));
        }
        Ok(v["result"].clone())
    }

    /// Sends the model's message and waits for the remote task.
    async fn send(&self, agent: &RemoteAgent, input: &Value, at: At<'_>) -> Result<Value, String> {
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
        let result = self
            .rpc(agent, &card, at, "SendMessage", json!({"message": message}))
            .await?;
        let mut task = match result.get("task") {
            Some(task) => task.clone(),
            // A bare message is the whole answer.
            None => {
                return Ok(json!({"state": "message", "reply": text_of(&result["message"])}));
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
    Some(Card { url, about })
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

/// What the model reads of a task: its state, ids, and the reply (or
/// what it waits for).
fn outcome(task: &Value) -> Value {
    let state = task["status"]["state"]
        .as_str()
        .unwrap_or("TASK_STATE_UNSPECIFIED")
        .trim_start_matches("TASK_STATE_")
        .to_ascii_lowercase()
        .replace('_', "-");
    let artifacts: Vec<String> = task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text_of)
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
                r = self.send(agent, input, At { hops, session: Some(&ctx.session_id) }) => match r {
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
