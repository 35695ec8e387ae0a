//! Cassettes: every model exchange recorded to files, or served from
//! them instead of the provider (`agentkit eval --record DIR` /
//! `--replay DIR`).
//!
//! An exchange is keyed by its request's fingerprint: the SHA-256 of the
//! request as the provider would see it (model and params, system
//! prompt, tool catalog, conversation), with call ids renumbered by first
//! appearance so the random turn ids inside them do not count. The file
//! `<dir>/<fingerprint>.json` holds that request and the streamed
//! response: reasoning and text deltas in order, the tool calls, usage,
//! or the provider's error. Replay streams the recorded deltas into the
//! step and gives the calls fresh ids; a request that matches no
//! recording fails the step with a diff against the closest recording,
//! so a changed prompt or tool shows what changed.

use std::path::{Path, PathBuf};

use agentkit_manifest::ModelSpec;
use agentkit_protocol::{Message, ToolCall, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Model, ModelReply, StepRequest, StepSink};

/// Whether model exchanges are recorded or replayed, and where.
#[derive(Debug, Clone)]
pub enum Cassette {
    /// Call the provider and store every exchange in this folder.
    Record(PathBuf),
    /// Answer every step from this folder; never call a provider.
    Replay(PathBuf),
    /// Answer every model call, in order, from a stored session's log
    /// (`agentkit replay`), and tool calls from it too unless they run
    /// live; never call a provider.
    Session(std::sync::Arc<super::recorded::RecordedSession>),
}

impl PartialEq for Cassette {
    fn eq(&self, other: &Cassette) -> bool {
        match (self, other) {
            (Cassette::Record(a), Cassette::Record(b))
            | (Cassette::Replay(a), Cassette::Replay(b)) => a == b,
            (Cassette::Session(a), Cassette::Session(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Cassette {}

impl Cassette {
    /// The folder of recordings (`None` for a stored session's answers).
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Cassette::Record(dir) | Cassette::Replay(dir) => Some(dir),
            Cassette::Session(_) => None,
        }
    }
}

/// One streamed piece of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Chunk {
    Reasoning(String),
    Text(String),
}

/// What a recorded step answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    chunks: Vec<Chunk>,
    #[serde(default)]
    tool_calls: Vec<RecordedCall>,
    #[serde(default)]
    usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordedCall {
    tool_name: String,
    input: Value,
}

/// One cassette file.
#[derive(Debug, Serialize, Deserialize)]
struct Exchange {
    request: Value,
    response: Response,
}

/// A turn's model behind a cassette.
#[derive(Debug)]
pub(crate) struct CassetteTurn {
    cassette: Cassette,
    spec: ModelSpec,
    /// The provider, when recording.
    inner: Option<Model>,
}

impl CassetteTurn {
    pub(crate) fn new(cassette: Cassette, spec: &ModelSpec, inner: Option<Model>) -> CassetteTurn {
        CassetteTurn {
            cassette,
            spec: spec.clone(),
            inner,
        }
    }

    pub(crate) async fn step(
        &self,
        request: &StepRequest<'_>,
        sink: &mut StepSink<'_>,
    ) -> Result<ModelReply, String> {
        let doc = request_doc(&self.spec, request);
        let key = fingerprint(&doc);
        let Some(dir) = self.cassette.dir() else {
            return Err("cassette: a stored session answers through its own model".to_owned());
        };
        let path = dir.join(format!("{key}.json"));
        match (&self.cassette, &self.inner) {
            (Cassette::Record(dir), Some(inner)) => {
                sink.start_tape();
                let result = inner.step(request, sink).await;
                let chunks = sink.take_tape();
                let response = match &result {
                    Ok(reply) => Response {
                        chunks,
                        tool_calls: reply
                            .tool_calls
                            .iter()
                            .map(|c| RecordedCall {
                                tool_name: c.tool_name.clone(),
                                input: c.input.clone(),
                            })
                            .collect(),
                        usage: reply.usage,
                        error: None,
                    },
                    Err(e) => Response {
                        chunks,
                        tool_calls: Vec::new(),
                        usage: Usage::default(),
                        error: Some(e.clone()),
                    },
                };
                let exchange = Exchange {
                    request: doc,
                    response,
                };
                if let Err(e) = write(dir, &path, &exchange).await {
                    return Err(format!(
                        "cassette: cannot record into {}: {e}",
                        dir.display()
                    ));
                }
                result
            }
            _ => {
                let Ok(text) = tokio::fs::read_to_string(&path).await else {
                    return Err(no_match(dir, &doc).await);
                };
                let exchange: Exchange = serde_json::from_str(&text)
                    .map_err(|e| format!("cassette {} is not valid: {e}", path.display()))?;
                for chunk in &exchange.response.chunks {
                    match chunk {
                        Chunk::Reasoning(d) => sink.reasoning(d).await,
                        Chunk::Text(d) => sink.text(d).await,
                    }
                }
                if let Some(e) = exchange.response.error {
                    return Err(e);
                }
                let tool_calls = exchange
                    .response
                    .tool_calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| ToolCall {
                        call_id: request.call_id(i),
                        tool_name: c.tool_name,
                        input: c.input,
                    })
                    .collect();
                Ok(ModelReply {
                    tool_calls,
                    usage: exchange.response.usage,
                })
            }
        }
    }
}

async fn write(dir: &Path, path: &Path, exchange: &Exchange) -> std::io::Result<()> {
    tokio::fs::create_dir_all(dir).await?;
    let text = serde_json::to_string_pretty(exchange).map_err(std::io::Error::other)?;
    // Concurrent identical requests write the same name: the rename keeps
    // the file whole.
    let tmp = path.with_extension(format!("json.{}.tmp", uuid_like()));
    tokio::fs::write(&tmp, text).await?;
    tokio::fs::rename(&tmp, path).await
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The request as a provider sees it, with call ids renumbered.
fn request_doc(spec: &ModelSpec, request: &StepRequest<'_>) -> Value {
    json!({
        "model": model_label(spec),
        "params": spec.params,
        "system": super::system_prompt(request.agent, request.as_of),
        "tools": tools_doc(request.agent, request.tools),
        "messages": messages_doc(request.conversation),
    })
}

/// The tools of a request document.
fn tools_doc(
    agent: &agentkit_manifest::Agent,
    tools: &[std::sync::Arc<dyn crate::DynTool>],
) -> Value {
    Value::Array(
        super::tool_defs(agent, tools)
            .into_iter()
            .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.schema}))
            .collect(),
    )
}

/// The messages of a request document, call ids renumbered in order of
/// appearance.
fn messages_doc(conversation: &[Message]) -> Value {
    let mut ids: Vec<String> = Vec::new();
    let mut renumber = |id: &str| -> String {
        let n = match ids.iter().position(|known| known == id) {
            Some(n) => n,
            None => {
                ids.push(id.to_owned());
                ids.len() - 1
            }
        };
        format!("call-{}", n + 1)
    };
    Value::Array(
        conversation
            .iter()
            .map(|m| match m {
                Message::User { text, .. } => json!({"role": "user", "text": text}),
                Message::Assistant { text, tool_calls } => json!({
                    "role": "assistant",
                    "text": text,
                    "toolCalls": tool_calls
                        .iter()
                        .map(|c| json!({"callId": renumber(&c.call_id), "toolName": c.tool_name, "input": c.input}))
                        .collect::<Vec<_>>(),
                }),
                Message::Tool {
                    call_id,
                    tool_name,
                    output,
                    is_error,
                } => json!({
                    "role": "tool",
                    "callId": renumber(call_id),
                    "toolName": tool_name,
                    "output": output,
                    "isError": is_error,
                }),
            })
            .collect(),
    )
}

/// A request's model as its document names it.
fn model_label(spec: &ModelSpec) -> String {
    match spec.provider {
        agentkit_manifest::Provider::Test => "test".to_owned(),
        p => format!(
            "{}:{}",
            serde_json::to_value(p)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            spec.id
        ),
    }
}

/// The digest of one part of a request document.
fn part_digest(part: &Value) -> String {
    let bytes = serde_json::to_vec(part).unwrap_or_default();
    hex::encode(&Sha256::digest(&bytes)[..8])
}

/// The digests of the parts of a turn's requests that its steps share
/// (model, params, system prompt, tools), computed once per turn; each
/// step adds its messages' ([`of`](Self::of)). The same digests as
/// [`request_digest`] gives for each step.
#[derive(Debug, Clone)]
pub(crate) struct TurnDigests {
    model: String,
    params: String,
    system: String,
    tools: String,
}

/// A turn's shared digests, kept for the next turns of the same agent,
/// tools, instant and model: the agent and tools are held weakly, so an
/// entry matches only while they live (their addresses cannot be reused
/// meanwhile), and an agent reloaded from disk is a new one.
struct CachedDigests {
    agent: std::sync::Weak<agentkit_manifest::Agent>,
    tools: Vec<std::sync::Weak<dyn crate::DynTool>>,
    as_of: Option<String>,
    model: String,
    params: String,
    digests: TurnDigests,
}

/// The most turns' digests kept.
const CACHED_DIGESTS: usize = 64;

static DIGESTS: std::sync::Mutex<Vec<CachedDigests>> = std::sync::Mutex::new(Vec::new());

impl TurnDigests {
    /// The shared digests of a turn of `agent` with `tools` at `as_of` on
    /// `spec`: from the cache when an earlier turn had the same (the
    /// system prompt and the tools' schemas are neither rebuilt nor
    /// serialised again), else computed and kept.
    pub(crate) fn new(
        spec: &ModelSpec,
        agent: &std::sync::Arc<agentkit_manifest::Agent>,
        tools: &[std::sync::Arc<dyn crate::DynTool>],
        as_of: Option<&str>,
    ) -> TurnDigests {
        use std::sync::{Arc, Weak};
        let model = model_label(spec);
        let params = serde_json::to_string(&spec.params).unwrap_or_default();
        let same = |c: &CachedDigests| {
            c.model == model
                && c.params == params
                && c.as_of.as_deref() == as_of
                && std::ptr::eq(c.agent.as_ptr(), Arc::as_ptr(agent))
                && c.tools.len() == tools.len()
                && c.tools
                    .iter()
                    .zip(tools)
                    .all(|(w, t)| Weak::ptr_eq(w, &Arc::downgrade(t)))
        };
        {
            let mut cache = DIGESTS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(at) = cache.iter().position(same) {
                let hit = cache.remove(at);
                let digests = hit.digests.clone();
                cache.push(hit);
                return digests;
            }
        }
        let digests = TurnDigests {
            model: model.clone(),
            params: part_digest(&json!(spec.params)),
            system: part_digest(&Value::String(super::system_prompt(agent, as_of))),
            tools: part_digest(&tools_doc(agent, tools)),
        };
        let mut cache = DIGESTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.retain(|c| c.agent.strong_count() > 0);
        if cache.len() >= CACHED_DIGESTS {
            cache.remove(0);
        }
        cache.push(CachedDigests {
            agent: Arc::downgrade(agent),
            tools: tools.iter().map(Arc::downgrade).collect(),
            as_of: as_of.map(str::to_owned),
            model,
            params,
            digests: digests.clone(),
        });
        digests
    }

    /// The digests of the step whose conversation is `conversation`.
    pub(crate) fn of(&self, conversation: &[Message]) -> agentkit_protocol::RequestDigest {
        agentkit_protocol::RequestDigest {
            model: self.model.clone(),
            params: self.params.clone(),
            system: self.system.clone(),
            tools: self.tools.clone(),
            messages: part_digest(&messages_doc(conversation)),
        }
    }
}

/// The digests of `request`, part by part, over the same document a
/// cassette keys its recordings by.
#[cfg(test)]
pub(crate) fn request_digest(
    spec: &ModelSpec,
    request: &StepRequest<'_>,
) -> agentkit_protocol::RequestDigest {
    let doc = request_doc(spec, request);
    agentkit_protocol::RequestDigest {
        model: doc["model"].as_str().unwrap_or_default().to_owned(),
        params: part_digest(&doc["params"]),
        system: part_digest(&doc["system"]),
        tools: part_digest(&doc["tools"]),
        messages: part_digest(&doc["messages"]),
    }
}

/// The cassette file (name and content) that answers a step whose
/// request is made of these parts with `answer`: what `agentkit eval add`
/// writes from a stored session.
#[allow(clippy::too_many_arguments)]
pub fn recorded_exchange(
    spec: &ModelSpec,
    agent: &std::sync::Arc<agentkit_manifest::Agent>,
    tools: &[std::sync::Arc<dyn crate::DynTool>],
    conversation: &[Message],
    as_of: Option<&str>,
    answer: &super::recorded::RecordedAnswer,
) -> (String, Value) {
    let cancel = tokio_util::sync::CancellationToken::new();
    let request = StepRequest {
        agent,
        conversation,
        step: 1,
        turn_id: "",
        cancel: &cancel,
        tools,
        as_of,
    };
    let doc = request_doc(spec, &request);
    let name = format!("{}.json", fingerprint(&doc));
    let mut chunks = Vec::new();
    if let Some(r) = answer.reasoning.as_ref().filter(|r| !r.is_empty()) {
        chunks.push(Chunk::Reasoning(r.clone()));
    }
    if !answer.text.is_empty() {
        chunks.push(Chunk::Text(answer.text.clone()));
    }
    let exchange = Exchange {
        request: doc,
        response: Response {
            chunks,
            tool_calls: answer
                .tool_calls
                .iter()
                .map(|c| RecordedCall {
                    tool_name: c.tool_name.clone(),
                    input: c.input.clone(),
                })
                .collect(),
            usage: answer.usage,
            error: None,
        },
    };
    (name, serde_json::to_value(&exchange).unwrap_or_default())
}

/// The cassette file that answers a compaction's summary request with
/// `answer`: the request the turn sent when it folded the first
/// `messages` messages of `conversation` (the turn's conversation just
/// before the compaction), under `spec`. `dir`: the agent's folder.
pub fn recorded_summary(
    spec: &ModelSpec,
    dir: &Path,
    conversation: &[Message],
    messages: usize,
    answer: &super::recorded::RecordedAnswer,
) -> (String, Value) {
    let folded = conversation.get(..messages).unwrap_or(conversation);
    let agent = crate::complete::completion_agent(spec, dir, crate::context::SUMMARY_PROMPT);
    let user = [Message::user(crate::context::transcript(folded))];
    recorded_exchange(spec, &agent, &[], &user, None, answer)
}

fn fingerprint(doc: &Value) -> String {
    let bytes = serde_json::to_vec(doc).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    hex::encode(&digest[..16])
}

/// The error of a request no recording answers: what changed against the
/// closest recording of the same model.
async fn no_match(dir: &Path, doc: &Value) -> String {
    let mut best: Option<(usize, String, Vec<String>)> = None;
    let current = pretty_lines(doc);
    if let Ok(mut entries) = tokio::fs::read_dir(dir).await {
        while let Ok(Some(entry)) = entries.next_entry().await {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Ok(text) = tokio::fs::read_to_string(&path).await else {
                continue;
            };
            let Ok(exchange) = serde_json::from_str::<Exchange>(&text) else {
                continue;
            };
            if exchange.request.get("model") != doc.get("model") {
                continue;
            }
            let recorded = pretty_lines(&exchange.request);
            let diff = line_diff(&recorded, &current);
            let changed = diff.iter().filter(|l| !l.starts_with(' ')).count();
            if best.as_ref().is_none_or(|(n, _, _)| changed < *n) {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                best = Some((changed, name, diff));
            }
        }
    }
    let head = format!(
        "cassette: no recorded exchange in {} matches this request",
        dir.display()
    );
    match best {
        None => format!("{head} (no recording of model {} there)", doc["model"]),
        Some((_, name, diff)) => {
            let mut out =
                format!("{head}; against the closest recording ({name}), - recorded, + now:");
            out.push_str(&compact_diff(&diff));
            out
        }
    }
}

/// The most diff lines a mismatch shows.
const SHOWN_LINES: usize = 60;
/// The most characters of one line a mismatch shows.
const SHOWN_WIDTH: usize = 160;

/// The changed lines of `diff` with two lines of context, `…` where lines
/// are skipped, each line clipped to [`SHOWN_WIDTH`] around where it
/// differs from its counterpart, so a long prompt that changed in one
/// place shows that place only.
fn compact_diff(diff: &[String]) -> String {
    let shown = context_indices(diff, 2);
    let mut out = String::new();
    let mut last: Option<usize> = None;
    for (count, &i) in shown.iter().enumerate() {
        if count == SHOWN_LINES {
            out.push_str(&format!("\n… ({} more lines)", shown.len() - count));
            break;
        }
        if last.is_some_and(|l| i > l + 1) || (last.is_none() && i > 0) {
            out.push_str("\n …");
        }
        last = Some(i);
        let line = &diff[i];
        // A changed line is clipped where it starts to differ from the
        // nearest line of the other side, so both show the same place.
        let other = match line.chars().next() {
            Some('-') => diff[i + 1..]
                .iter()
                .take_while(|l| !l.starts_with(' '))
                .find(|l| l.starts_with('+')),
            Some('+') => diff[..i]
                .iter()
                .rev()
                .take_while(|l| !l.starts_with(' '))
                .find(|l| l.starts_with('-')),
            _ => None,
        };
        out.push('\n');
        out.push_str(&clip(
            line,
            other.map(|o| common_prefix(&line[1..], &o[1..])),
        ));
    }
    if last.is_some_and(|l| l + 1 < diff.len()) && shown.len() <= SHOWN_LINES {
        out.push_str("\n …");
    }
    out
}

/// Characters two strings share at their start.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// `line` (its first character the diff marker) at most [`SHOWN_WIDTH`]
/// characters wide, starting a little before character `differs` of its
/// text when that is far in.
fn clip(line: &str, differs: Option<usize>) -> String {
    let mut chars = line.chars();
    let marker = chars.next().unwrap_or(' ');
    let text: Vec<char> = chars.collect();
    if text.len() <= SHOWN_WIDTH {
        return line.to_owned();
    }
    let start = differs.map_or(0, |d| d.saturating_sub(40));
    let end = (start + SHOWN_WIDTH).min(text.len());
    let mut out = String::new();
    out.push(marker);
    if start > 0 {
        out.push('…');
    }
    out.extend(&text[start..end]);
    if end < text.len() {
        out.push('…');
    }
    out
}

/// The request as lines to diff: pretty JSON, except that a string with
/// line breaks (a system prompt, a long message) is shown line by line
/// between `"""` marks, so a change in one line of it is one line of diff.
fn pretty_lines(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    render_lines(v, 0, String::new(), "", &mut out);
    out
}

fn render_lines(v: &Value, indent: usize, prefix: String, comma: &str, out: &mut Vec<String>) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) if !map.is_empty() => {
            out.push(format!("{pad}{prefix}{{"));
            let n = map.len();
            for (k, (key, value)) in map.iter().enumerate() {
                let key = serde_json::to_string(key).unwrap_or_default();
                let comma = if k + 1 < n { "," } else { "" };
                render_lines(value, indent + 2, format!("{key}: "), comma, out);
            }
            out.push(format!("{pad}}}{comma}"));
        }
        Value::Array(items) if !items.is_empty() => {
            out.push(format!("{pad}{prefix}["));
            let n = items.len();
            for (k, item) in items.iter().enumerate() {
                let comma = if k + 1 < n { "," } else { "" };
                render_lines(item, indent + 2, String::new(), comma, out);
            }
            out.push(format!("{pad}]{comma}"));
        }
        Value::String(text) if text.contains('\n') => {
            out.push(format!("{pad}{prefix}\"\"\""));
            // `split`, not `lines`: a trailing line break is a change too.
            for line in text.split('\n') {
                out.push(if line.is_empty() {
                    String::new()
                } else {
                    format!("{pad}  {line}")
                });
            }
            out.push(format!("{pad}\"\"\"{comma}"));
        }
        other => out.push(format!(
            "{pad}{prefix}{}{comma}",
            serde_json::to_string(other).unwrap_or_default()
        )),
    }
}

/// A line diff (longest common subsequence): `-` recorded, `+` current,
/// ` ` unchanged.
fn line_diff(a: &[String], b: &[String]) -> Vec<String> {
    let (n, m) = (a.len(), b.len());
    // Requests are small; bound the table anyway.
    if n.saturating_mul(m) > 4_000_000 {
        return vec![format!("- ({n} lines)"), format!("+ ({m} lines)")];
    }
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(format!(" {}", a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("-{}", a[i]));
            i += 1;
        } else {
            out.push(format!("+{}", b[j]));
            j += 1;
        }
    }
    out
}

/// The changed lines with `around` unchanged lines of context each side.
#[cfg(test)]
fn context(diff: &[String], around: usize) -> Vec<&String> {
    context_indices(diff, around)
        .into_iter()
        .map(|i| &diff[i])
        .collect()
}

/// The indices of the changed lines and of `around` unchanged lines each
/// side of them, in order.
fn context_indices(diff: &[String], around: usize) -> Vec<usize> {
    let changed: Vec<usize> = diff
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.starts_with(' '))
        .map(|(i, _)| i)
        .collect();
    (0..diff.len())
        .filter(|i| changed.iter().any(|c| i.abs_diff(*c) <= around))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A turn's digests, computed once for what its steps share, are the
    /// digests of each step's whole request.
    #[test]
    fn a_turns_shared_digests_are_each_steps_own() {
        let agent = std::sync::Arc::new(agentkit_manifest::Agent {
            dir: Default::default(),
            config: Default::default(),
            instructions: None,
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
        });
        let spec = agentkit_manifest::parse_model_string("openai:gpt-4.1").unwrap();
        let conversation = [
            Message::user("hi"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    call_id: "c9".into(),
                    tool_name: "t".into(),
                    input: json!({"a": 1}),
                }],
            },
            Message::Tool {
                call_id: "c9".into(),
                tool_name: "t".into(),
                output: json!("ok"),
                is_error: false,
            },
        ];
        let cancel = tokio_util::sync::CancellationToken::new();
        let turn = TurnDigests::new(&spec, &agent, &[], Some("2025-01-01T00:00:00Z"));
        // A later turn of the same agent takes them from the cache; one at
        // another instant does not.
        let again = TurnDigests::new(&spec, &agent, &[], Some("2025-01-01T00:00:00Z"));
        assert_eq!(again.of(&conversation), turn.of(&conversation));
        let other = TurnDigests::new(&spec, &agent, &[], Some("2026-01-01T00:00:00Z"));
        assert_ne!(other.system, turn.system);
        for n in 1..=conversation.len() {
            let request = StepRequest {
                agent: &agent,
                conversation: &conversation[..n],
                step: 1,
                turn_id: "t",
                cancel: &cancel,
                tools: &[],
                as_of: Some("2025-01-01T00:00:00Z"),
            };
            assert_eq!(turn.of(&conversation[..n]), request_digest(&spec, &request));
        }
    }

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_owned).collect()
    }

    /// A long system prompt that changed in one line shows that line and
    /// two around it, once each side, not the whole prompt.
    #[test]
    fn a_changed_prompt_shows_only_what_changed() {
        let prompt: String = (1..=200)
            .map(|n| format!("Rule {n}: answer about the weather with care.\n"))
            .collect();
        let recorded = json!({"model": "test", "system": prompt, "messages": [{"role": "user", "text": "hi"}]});
        let now = json!({"model": "test", "system": format!("{prompt}Answer in one sentence.\n"), "messages": [{"role": "user", "text": "hi"}]});
        let diff = line_diff(&pretty_lines(&recorded), &pretty_lines(&now));
        let shown = compact_diff(&diff);
        assert_eq!(
            shown,
            "\n …\n     Rule 199: answer about the weather with care.\n     Rule 200: answer about the weather with care.\n+    Answer in one sentence.\n \n   \"\"\",\n …"
        );
        assert!(shown.len() < 400, "{shown}");
    }

    /// A line break added at the end of a prompt is a change that shows.
    #[test]
    fn a_trailing_line_break_shows() {
        let diff = line_diff(
            &pretty_lines(&json!({"system": "a\nb"})),
            &pretty_lines(&json!({"system": "a\nb\n"})),
        );
        assert_eq!(
            compact_diff(&diff),
            "\n …\n     a\n     b\n+\n   \"\"\"\n }"
        );
    }

    /// One long line that changed near its end shows the place it
    /// changed, clipped, on both sides.
    #[test]
    fn a_long_line_is_clipped_where_it_changed() {
        let long = "x".repeat(1000);
        let diff = vec![format!("-{long}a"), format!("+{long}b")];
        let shown = compact_diff(&diff);
        let lines: Vec<&str> = shown.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 2, "{shown}");
        assert!(
            lines[0].starts_with("-…") && lines[0].ends_with('a'),
            "{shown}"
        );
        assert!(
            lines[1].starts_with("+…") && lines[1].ends_with('b'),
            "{shown}"
        );
        assert!(lines[0].chars().count() <= SHOWN_WIDTH + 3, "{shown}");
    }

    #[test]
    fn diffs_show_what_changed() {
        let d = line_diff(&lines("a\nb\nc\nd"), &lines("a\nB\nc\nd\ne"));
        assert_eq!(d, [" a", "-b", "+B", " c", " d", "+e"]);
        let ctx: Vec<&str> = context(&d, 0).into_iter().map(String::as_str).collect();
        assert_eq!(ctx, ["-b", "+B", "+e"]);
    }
}
