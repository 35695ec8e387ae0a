//! What a request may hold: the model's context window, the harness's
//! estimate of a request's size, compaction (older turns summarised by
//! the model, recorded as `context.compacted`) and the trimming of large
//! tool results in older messages.
//!
//! The estimate is a quarter of the characters of what the provider is
//! sent (system prompt, tool catalog, conversation as JSON): close to what
//! OpenAI's and Anthropic's tokenizers count for English prose and code,
//! pessimistic for JSON-heavy tool results, low for text outside ASCII.
//! It is calibrated against what the provider counted: every completed
//! turn records its requests' estimated and counted input tokens
//! (`turn.completed` `sizing`), and once a session's estimates cover
//! [`CALIBRATE_AFTER`] tokens, later turns scale theirs by counted ÷
//! estimated, never below 1 (a low estimate risks a refused request, a high
//! one only an early compaction) and at most [`MAX_CALIBRATION`].
//! `step.completed` records the calibrated estimate beside the tokens the
//! provider counted. Everything here is a pure function of the session's
//! log, so a restart sends the same request as the process that crashed
//! would have.

use agentkit_manifest::{Agent, ModelSpec, Provider};
use agentkit_protocol::{Message, Sizing, Usage};

use crate::providers::{approx_tokens, system_prompt, tool_defs};

/// The marker that opens the message a compaction leaves in the
/// conversation.
pub const SUMMARY_PREFIX: &str = "[Summary of the earlier conversation, written when it was compacted to fit the model's context window]";

/// The instructions of the summarisation request.
pub const SUMMARY_PROMPT: &str = "You compact a conversation between a user and an AI agent so the agent can continue it with less context. Write a summary that keeps everything the agent needs: the user's goals and constraints, decisions made, facts learned (names, numbers, paths, identifiers), what tools were called and what they returned that still matters, and what is still open. Write it as plain notes in the third person, without greeting or commentary. Do not invent anything.";

/// Tool results above this many bytes are trimmed in older messages when a
/// request does not fit.
pub(crate) const TRIM_ABOVE_BYTES: usize = 2048;
/// How much of a trimmed result is kept.
const TRIM_KEEP_BYTES: usize = 1024;
/// Transcript lines of one message in the summarisation request.
const TRANSCRIPT_MESSAGE_BYTES: usize = 8192;

/// Estimates are calibrated once a session's turns estimated this many
/// input tokens (fewer is too little to tell a tokenizer's ratio from the
/// noise of small requests).
pub const CALIBRATE_AFTER: u64 = 2_000;
/// The most an estimate is scaled up by.
pub const MAX_CALIBRATION: f64 = 3.0;

/// The factor a session's estimates are scaled by, from its earlier
/// turns' `sizing`: 1 until they estimated [`CALIBRATE_AFTER`] tokens,
/// then counted ÷ estimated, within 1 to [`MAX_CALIBRATION`].
pub fn calibration(prior: Sizing) -> f64 {
    if prior.estimated_input_tokens < CALIBRATE_AFTER {
        return 1.0;
    }
    (prior.counted_input_tokens as f64 / prior.estimated_input_tokens as f64)
        .clamp(1.0, MAX_CALIBRATION)
}

/// A raw estimate, calibrated.
pub(crate) fn calibrated(raw: u64, factor: f64) -> u64 {
    if factor == 1.0 {
        raw
    } else {
        (raw as f64 * factor).ceil() as u64
    }
}

/// The raw estimate that calibrates to at most `tokens`.
pub(crate) fn uncalibrated(tokens: u64, factor: f64) -> u64 {
    if factor == 1.0 {
        tokens
    } else {
        (tokens as f64 / factor).floor() as u64
    }
}

/// The input tokens a provider counted for one request: Anthropic reports
/// cached prompt tokens apart from `input_tokens`; OpenAI's
/// `prompt_tokens` include them.
pub(crate) fn counted_input(provider: Provider, usage: &Usage) -> u64 {
    match provider {
        Provider::Anthropic => usage
            .input_tokens
            .saturating_add(usage.cache_read_tokens)
            .saturating_add(usage.cache_write_tokens),
        _ => usage.input_tokens,
    }
}

/// The model's window and what a request may fill of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// The whole window, in tokens.
    pub tokens: u64,
    /// Kept free for the reply.
    pub reserve: u64,
    /// Compaction starts above this many input tokens.
    pub threshold: u64,
}

impl Window {
    /// The most input tokens a request may have.
    pub fn limit(&self) -> u64 {
        self.tokens.saturating_sub(self.reserve)
    }
}

/// The windows of model families whose size is published (the longest
/// matching prefix wins). Anything else needs `[model] context_window`.
const KNOWN: &[(Provider, &str, u64)] = &[
    (Provider::Openai, "gpt-4.1", 1_047_576),
    (Provider::Openai, "gpt-4o", 128_000),
    (Provider::Openai, "gpt-5", 400_000),
    (Provider::Openai, "o3", 200_000),
    (Provider::Openai, "o4-mini", 200_000),
    (Provider::Anthropic, "claude-", 200_000),
];

/// The window of `spec` under `[harness]` settings of `agent`, `None`
/// when it is unknown (no accounting, no compaction).
pub fn window(spec: &ModelSpec, agent: &Agent) -> Option<Window> {
    let tokens = spec.context_window.or_else(|| {
        KNOWN
            .iter()
            .filter(|(p, prefix, _)| *p == spec.provider && spec.id.starts_with(prefix))
            .max_by_key(|(_, prefix, _)| prefix.len())
            .map(|(_, _, n)| *n)
    })?;
    let reserve = spec
        .max_output_tokens
        .unwrap_or_else(|| (tokens / 8).min(16_384))
        .min(tokens.saturating_sub(1));
    let threshold = ((tokens - reserve) as f64 * agent.config.harness.compaction_threshold) as u64;
    Some(Window {
        tokens,
        reserve,
        threshold,
    })
}

/// A step's conversation as the provider is sent it, and the request's
/// estimated input tokens, exactly as a turn computes them: older tool
/// results trimmed when the request would pass the window's threshold
/// (compaction, being recorded, is already in `conversation`). Answers
/// whether anything was trimmed. `prior` is the `sizing` of the
/// session's turns before this one. For showing a step's context.
pub fn as_sent(
    spec: Option<&ModelSpec>,
    agent: &Agent,
    extra: &[std::sync::Arc<dyn crate::DynTool>],
    as_of: Option<&str>,
    conversation: Vec<Message>,
    prior: Sizing,
) -> (Vec<Message>, u64, bool) {
    let factor = calibration(prior);
    let fixed = fixed_tokens(agent, extra, as_of);
    let estimate = calibrated(fixed + conversation_tokens(&conversation), factor);
    match spec.and_then(|s| window(s, agent)) {
        Some(w) if estimate > w.threshold => {
            let (fit, total) = trim_to_fit(&conversation, fixed, uncalibrated(w.threshold, factor));
            let trimmed = fit != conversation;
            (fit, calibrated(total, factor), trimmed)
        }
        _ => (conversation, estimate, false),
    }
}

/// The fixed part of every request: system prompt and tool catalog.
pub(crate) fn fixed_tokens(
    agent: &Agent,
    extra: &[std::sync::Arc<dyn crate::DynTool>],
    as_of: Option<&str>,
) -> u64 {
    let tools: usize = tool_defs(agent, extra)
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.schema.to_string().len() + 32)
        .sum();
    approx_tokens(system_prompt(agent, as_of).len() + tools)
}

/// One message as the estimate counts it.
/// The estimated tokens of the system prompt and of the tool catalog
/// (together `fixed_tokens` but for rounding), for a step's breakdown.
pub fn fixed_breakdown(
    agent: &Agent,
    extra: &[std::sync::Arc<dyn crate::DynTool>],
    as_of: Option<&str>,
) -> (u64, u64) {
    let tools: usize = tool_defs(agent, extra)
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.schema.to_string().len() + 32)
        .sum();
    (
        approx_tokens(system_prompt(agent, as_of).len()),
        approx_tokens(tools),
    )
}

/// The estimated tokens of one message of the conversation.
pub fn message_tokens(m: &Message) -> u64 {
    let images = match m {
        Message::User { images, .. } => images.len(),
        Message::Tool { output, .. } => crate::images::count(output),
        Message::Assistant { .. } => 0,
    };
    approx_tokens(serde_json::to_string(m).map_or(0, |s| s.len())) + IMAGE_TOKENS * images as u64
}

/// What one image a message or tool result names is estimated at: the
/// log holds its path, not its bytes, and providers charge by its size in
/// pixels. This is about what Anthropic charges for an image at its
/// default size limit (1.15 megapixels, about 1,600 tokens; OpenAI's
/// high-detail 1024×1024 image is 765), so the estimate errs high.
pub(crate) const IMAGE_TOKENS: u64 = 1_600;

pub(crate) fn conversation_tokens(conversation: &[Message]) -> u64 {
    conversation.iter().map(message_tokens).sum()
}

/// Where a compaction may cut `history` (the turns before this one): the
/// start of the second-to-last turn (of the last, when there are only
/// two), so the most recent turns stay verbatim. A turn starts at a user
/// message that follows a non-user one. `None` when nothing older than the
/// kept turns exists.
pub(crate) fn split_point(history: &[Message]) -> Option<usize> {
    let starts: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            matches!(m, Message::User { .. })
                && (*i == 0 || !matches!(history[i - 1], Message::User { .. }))
        })
        .map(|(i, _)| i)
        .collect();
    let keep = if starts.len() > 2 { 2 } else { 1 };
    starts
        .len()
        .checked_sub(keep)
        .map(|k| starts[k])
        .filter(|&n| n > 0)
}

/// The message a compaction leaves in place of what it summarised.
pub fn summary_message(summary: &str) -> Message {
    Message::user(format!("{SUMMARY_PREFIX}\n\n{}", summary.trim()))
}

fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The summarisation request's user message: the messages as a transcript.
pub(crate) fn transcript(messages: &[Message]) -> String {
    let mut out = String::from(
        "Summarise this conversation so far (it will replace these messages in what the agent sees):\n\n",
    );
    for m in messages {
        let line = match m {
            Message::User { text, .. } => format!("USER: {text}"),
            Message::Assistant { text, tool_calls } => {
                let mut line = format!("AGENT: {text}");
                for c in tool_calls {
                    line.push_str(&format!("\n  called {}({})", c.tool_name, c.input));
                }
                line
            }
            Message::Tool {
                tool_name,
                output,
                is_error,
                ..
            } => format!(
                "TOOL {tool_name}{}: {output}",
                if *is_error { " (error)" } else { "" }
            ),
        };
        out.push_str(clip(&line, TRANSCRIPT_MESSAGE_BYTES));
        out.push_str("\n\n");
    }
    out
}

/// Trims tool results above [`TRIM_ABOVE_BYTES`], oldest first, until
/// `conversation` fits `limit` tokens (with `fixed` for the rest of the
/// request) or nothing is left to trim. The results of the step that just
/// ran (the tool messages at the end) are trimmed last. Answers the
/// conversation to send and its estimated size.
pub(crate) fn trim_to_fit(conversation: &[Message], fixed: u64, limit: u64) -> (Vec<Message>, u64) {
    let mut out = conversation.to_vec();
    let mut total = fixed + conversation_tokens(&out);
    if total <= limit {
        return (out, total);
    }
    for message in &mut out {
        if total <= limit {
            break;
        }
        let Message::Tool { output, .. } = &*message else {
            continue;
        };
        let text = match output {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if text.len() <= TRIM_ABOVE_BYTES {
            continue;
        }
        let before = message_tokens(message);
        let kept = clip(&text, TRIM_KEEP_BYTES);
        let trimmed = format!(
            "{kept}\n[trimmed by agentkit to fit the context window: {} of {} bytes omitted]",
            text.len() - kept.len(),
            text.len()
        );
        if let Message::Tool { output, .. } = message {
            *output = serde_json::Value::String(trimmed);
        }
        total = total - before + message_tokens(message);
    }
    (out, total)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn user(t: &str) -> Message {
        Message::user(t)
    }

    fn agent_says(t: &str) -> Message {
        Message::Assistant {
            text: t.to_owned(),
            tool_calls: Vec::new(),
        }
    }

    #[test]
    fn each_image_a_message_or_tool_result_names_is_counted() {
        let image = agentkit_protocol::ImageRef {
            media_type: "image/png".to_owned(),
            path: "shot.png".to_owned(),
            data: None,
        };
        let plain = message_tokens(&user("look"));
        let with_two = Message::User {
            text: "look".to_owned(),
            images: vec![image.clone(), image],
        };
        let extra = message_tokens(&with_two) - plain;
        assert!(
            (2 * IMAGE_TOKENS..2 * IMAGE_TOKENS + 40).contains(&extra),
            "{extra}"
        );
        let tool = |output: serde_json::Value| Message::Tool {
            call_id: "c".to_owned(),
            tool_name: "shot".to_owned(),
            output,
            is_error: false,
        };
        let text_only = message_tokens(&tool(
            serde_json::json!([{"type": "text", "text": "a chart"}]),
        ));
        let with_image = message_tokens(&tool(serde_json::json!([
            {"type": "text", "text": "a chart"},
            {"type": "image", "mediaType": "image/png", "path": ".agentkit/images/c-1.png"},
        ])));
        assert!(
            with_image - text_only >= IMAGE_TOKENS,
            "{with_image} vs {text_only}"
        );
    }

    #[test]
    fn the_split_keeps_the_last_two_turns() {
        let h = [
            user("1"),
            agent_says("a"),
            user("2"),
            user("2b"),
            agent_says("b"),
            user("3"),
            agent_says("c"),
        ];
        assert_eq!(split_point(&h), Some(2));
        // Two turns: only the last is kept.
        assert_eq!(split_point(&h[2..]), Some(3));
        // One turn: nothing older to summarise.
        assert_eq!(split_point(&h[..2]), None);
        assert_eq!(split_point(&[]), None);
    }

    #[test]
    fn trimming_takes_the_oldest_large_results_first() {
        let big = "x".repeat(10_000);
        let tool = |id: &str| Message::Tool {
            call_id: id.to_owned(),
            tool_name: "read".to_owned(),
            output: serde_json::Value::String(big.clone()),
            is_error: false,
        };
        let c = [user("q"), tool("1"), tool("2"), user("r")];
        let full = conversation_tokens(&c);
        // Room for all but about one result: only the first is trimmed.
        let (out, total) = trim_to_fit(&c, 0, full - 1_000);
        assert!(total <= full - 1_000, "{total}");
        let text = |m: &Message| match m {
            Message::Tool { output, .. } => output.as_str().unwrap().to_owned(),
            _ => String::new(),
        };
        assert!(text(&out[1]).contains("[trimmed by agentkit"));
        assert_eq!(text(&out[2]), big);
        // Nothing fits: everything large is trimmed, the rest is kept.
        let (out, total) = trim_to_fit(&c, 0, 10);
        assert!(total > 10);
        assert!(text(&out[2]).contains("8976 of 10000 bytes omitted"));
        assert_eq!(out[0], c[0]);
    }

    #[test]
    fn known_windows_and_explicit_ones() {
        let agent = agentkit_manifest::Agent {
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
        };
        let mut spec =
            agentkit_manifest::parse_model_string("anthropic:claude-sonnet-4-5").unwrap();
        let w = window(&spec, &agent).unwrap();
        assert_eq!(w.tokens, 200_000);
        assert_eq!(w.reserve, 16_384);
        assert_eq!(w.threshold, ((200_000 - 16_384) as f64 * 0.8) as u64);
        spec.context_window = Some(1_000);
        spec.max_output_tokens = Some(200);
        let w = window(&spec, &agent).unwrap();
        assert_eq!((w.tokens, w.reserve, w.limit()), (1_000, 200, 800));
        let test = agentkit_manifest::parse_model_string("test").unwrap();
        assert_eq!(window(&test, &agent), None);
    }

    #[test]
    fn calibration_raises_low_estimates_only_once_it_has_seen_enough() {
        let sizing = |estimated, counted| Sizing {
            estimated_input_tokens: estimated,
            counted_input_tokens: counted,
        };
        assert_eq!(calibration(sizing(0, 0)), 1.0);
        assert_eq!(calibration(sizing(1_999, 6_000)), 1.0, "too little seen");
        assert_eq!(calibration(sizing(4_000, 6_000)), 1.5);
        assert_eq!(calibration(sizing(4_000, 1_000)), 1.0, "never lowered");
        assert_eq!(calibration(sizing(4_000, 40_000)), MAX_CALIBRATION);
        assert_eq!(calibrated(1_000, 1.5), 1_500);
        assert_eq!(uncalibrated(1_500, 1.5), 1_000);
        assert_eq!(calibrated(7, 1.0), 7);
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 99,
            cache_read_tokens: 100,
            cache_write_tokens: 5,
        };
        assert_eq!(counted_input(Provider::Anthropic, &usage), 115);
        assert_eq!(counted_input(Provider::Openai, &usage), 10);
    }
}
