//! The `scripted:<file>` provider: replays model steps from a JSON file,
//! for tests and demos.
//!
//! The path is relative to the agent folder (`agent/`). The file:
//!
//! ```json
//! {"turns": [
//!   {"steps": [
//!     {"reasoning": "…", "text": "Let me check.",
//!      "toolCalls": [{"name": "get_weather", "input": {"city": "NYC"}}],
//!      "delayMs": 0},
//!     {"text": "It is sunny in NYC."}
//!   ]}
//! ]}
//! ```
//!
//! - Turn `k` of a session (`k` = the user messages already in the
//!   history, so the first turn is 0) plays `turns[k % turns.len()]`.
//! - Step `s` (1-based) of a turn plays `steps[s - 1]`; past the end the
//!   last step repeats, so a last step with tool calls loops until
//!   `max_steps`. A step without tool calls ends the turn.
//! - `text` is streamed as `message.appended` deltas of a few words each;
//!   `reasoning` likewise, before the text.
//! - `delayMs` waits before the step (an interrupt cuts it short).
//! - `error` fails the turn with that message instead of answering.
//! - `usage` (`inputTokens`, `outputTokens`, …) overrides the approximate
//!   usage (a quarter of the characters).
//! - A call's `id` is generated (`<turnId>-s<step>-c<n>`) unless given.
//!
//! The file is read at the start of every turn, so edits apply to the next
//! turn (it is parsed again only when its bytes changed). A file that
//! cannot be read or parsed fails the turn with a message naming it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use agentkit_protocol::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use super::{ModelReply, StepRequest, StepSink, approx_tokens, chunk_text};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Script {
    turns: Vec<ScriptTurn>,
    #[serde(skip)]
    path: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptTurn {
    steps: Vec<ScriptStep>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScriptStep {
    #[serde(default)]
    text: String,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    name: String,
    #[serde(default = "empty_object")]
    input: Value,
    #[serde(default)]
    id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Scripts parsed lately, by path, with the bytes they were parsed from.
type Parsed = HashMap<PathBuf, (Vec<u8>, Arc<Script>)>;
static PARSED: LazyLock<Mutex<Parsed>> = LazyLock::new(Mutex::default);
/// The most scripts [`PARSED`] keeps (it starts over past it).
const PARSED_MAX: usize = 64;

impl Script {
    /// The script at `path`, parsed again only when its bytes changed. The
    /// read is a small file's, inline: a trip to the blocking pool would
    /// cost more than the read.
    pub(crate) async fn load(path: &Path) -> Result<Arc<Script>, String> {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read model script {}: {e}", path.display()))?;
        let lock = || PARSED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, script)) = lock().get(path)
            && *seen == bytes
        {
            return Ok(Arc::clone(script));
        }
        let script = Arc::new(Script::parse(path, &bytes)?);
        let mut parsed = lock();
        if parsed.len() >= PARSED_MAX {
            parsed.clear();
        }
        parsed.insert(path.to_path_buf(), (bytes, Arc::clone(&script)));
        Ok(script)
    }

    fn parse(path: &Path, bytes: &[u8]) -> Result<Script, String> {
        let mut script: Script = serde_json::from_slice(bytes)
            .map_err(|e| format!("invalid model script {}: {e}", path.display()))?;
        if script.turns.is_empty() {
            return Err(format!("model script {} has no turns", path.display()));
        }
        if let Some(i) = script.turns.iter().position(|t| t.steps.is_empty()) {
            return Err(format!(
                "model script {}: turn {i} has no steps",
                path.display()
            ));
        }
        script.path = path.to_path_buf();
        Ok(script)
    }

    /// The steps of the session's turn `index` (0-based, wrapping).
    pub(crate) fn turn(&self, index: usize) -> ScriptedTurn {
        let steps = self
            .turns
            .get(index % self.turns.len().max(1))
            .map(|t| t.steps.clone())
            .unwrap_or_default();
        ScriptedTurn {
            steps,
            path: self.path.clone(),
        }
    }
}

/// One turn of a script, ready to replay.
#[derive(Debug)]
pub(crate) struct ScriptedTurn {
    steps: Vec<ScriptStep>,
    path: PathBuf,
}

impl ScriptedTurn {
    pub(super) async fn step(
        &self,
        request: &StepRequest<'_>,
        sink: &mut StepSink<'_>,
    ) -> Result<ModelReply, String> {
        let index = (request.step as usize)
            .saturating_sub(1)
            .min(self.steps.len().saturating_sub(1));
        let Some(step) = self.steps.get(index) else {
            return Err(format!("model script {} has no steps", self.path.display()));
        };
        if step.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(step.delay_ms)).await;
        }
        if let Some(message) = &step.error {
            return Err(message.clone());
        }
        if let Some(reasoning) = &step.reasoning {
            for chunk in chunk_text(reasoning, 3) {
                sink.reasoning(chunk).await;
            }
        }
        for chunk in chunk_text(&step.text, 3) {
            sink.text(chunk).await;
        }
        let tool_calls: Vec<ToolCall> = step
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                call_id: c.id.clone().unwrap_or_else(|| request.call_id(i)),
                tool_name: c.name.clone(),
                input: c.input.clone(),
            })
            .collect();
        let usage = step.usage.unwrap_or_else(|| {
            let calls = serde_json::to_string(&tool_calls).map_or(0, |s| s.len());
            let reasoning = step.reasoning.as_ref().map_or(0, String::len);
            Usage {
                input_tokens: request.approx_input_tokens(),
                output_tokens: approx_tokens(step.text.len() + reasoning + calls),
                ..Usage::default()
            }
        });
        Ok(ModelReply { tool_calls, usage })
    }
}
