//! A turn's reply, streamed into its Slack thread. Where the workspace
//! has Slack's streaming methods the first text starts a stream
//! (`chat.startStream`), later text is appended (`chat.appendStream`) at
//! most once per interval and the stream is stopped at the end
//! (`chat.stopStream`); elsewhere the first text posts a message
//! (`chat.postMessage`) and later text edits it (`chat.update`), each edit
//! carrying the whole text so a failed one is repaired by the next. Text
//! past Slack's size limit rolls over to a new message; each message is
//! started once, so nothing is doubled, and nothing is lost. Parked calls post an
//! Approve / Deny card when approvals are on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agentkit_protocol::{Event, EventData, TurnEnd};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::client::{ApiError, SlackApi};

/// The most characters one reply message holds before the rest rolls
/// over to the next (Slack truncates `text` past 40,000 characters and
/// renders long messages collapsed; 3,500 keeps each one readable and
/// well under the limit of a Block Kit section too).
pub(crate) const MESSAGE_LIMIT: usize = 3_500;

/// How long a stopping channel spends writing a reply's last text.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// How many times the last edit of a message is retried.
const FINAL_ATTEMPTS: u32 = 4;

/// Where the reply goes.
#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub(crate) channel: String,
    pub(crate) thread_ts: String,
}

/// Which turn of the followed events is the reply.
#[derive(Debug, Clone)]
pub(crate) enum Start {
    /// The first turn that starts after a `message.received`.
    AfterMessage,
    /// The first turn that starts after this call's approval resolved
    /// (a turn that resumes a conversation after a restart).
    AfterApproval(String),
}

/// Streams the reply of one turn into its thread.
pub(crate) struct Streamer<'a> {
    pub(crate) api: &'a SlackApi,
    pub(crate) thread: &'a Thread,
    pub(crate) interval: Duration,
    pub(crate) approvals: bool,
    /// Stream with `chat.startStream` / `appendStream` / `stopStream`;
    /// cleared (for the channel) when Slack refuses them.
    pub(crate) streaming: &'a AtomicBool,
    /// The user and team a stream is for (Slack asks for them outside
    /// direct messages).
    pub(crate) recipient: Option<(String, String)>,
    /// Show the thread's status while the turn works
    /// (`assistant.threads.setStatus`: direct-message threads, where
    /// Slack's assistant view lives).
    pub(crate) status: bool,
    pub(crate) session: &'a str,
    /// Called with the turn id once it is known; false means another
    /// streamer has it (coalesced messages share a turn): stop.
    pub(crate) claim: &'a (dyn Fn(&str) -> bool + Send + Sync),
    /// The channel stopping.
    pub(crate) stop: &'a CancellationToken,
}

/// The message being written, and those already full.
#[derive(Debug, Default)]
struct Messages {
    /// Everything the turn said, in order.
    text: String,
    /// Bytes of `text` already in earlier, finished messages.
    sealed: usize,
    /// The `ts` of the message showing `text[sealed..]`, once posted.
    current: Option<String>,
    /// What that message shows now (skip edits that change nothing).
    shown: String,
    last_edit: Option<Instant>,
    /// `current` is a stream (appended to, then stopped), not a post.
    streaming: bool,
    /// A message ended: the next text starts on a new paragraph.
    separate: bool,
}

impl Streamer<'_> {
    /// Follows `events` to the end of the turn, writing as it goes.
    /// Returns the turn id it replied to.
    pub(crate) async fn run(
        &self,
        mut events: BoxStream<'static, Event>,
        start: Start,
    ) -> Option<String> {
        let mut armed = false;
        let mut turn: Option<String> = None;
        let mut m = Messages::default();
        loop {
            let wait = self.next_flush(&m);
            let next = async {
                match wait {
                    Some(d) => tokio::time::timeout(d, events.next()).await.ok(),
                    None => Some(events.next().await),
                }
            };
            let next = tokio::select! {
                n = next => n,
                () = self.stop.cancelled() => {
                    // The channel stops: write what the turn said so far
                    // and end the stream, briefly, rather than leave it open.
                    let _ = tokio::time::timeout(STOP_GRACE, self.flush(&mut m, true)).await;
                    return turn;
                }
            };
            let Some(next) = next else {
                self.flush(&mut m, false).await;
                continue;
            };
            let Some(e) = next else {
                // The host stopped: leave what was written.
                self.flush(&mut m, true).await;
                return turn;
            };
            let ours = turn.is_some() && e.turn_id == turn;
            if ours && let Some(end) = TurnEnd::of(&e) {
                if end.ok {
                    if m.text.trim().is_empty() && !end.text.trim().is_empty() {
                        m.text = end.text;
                    }
                } else {
                    if !m.text[m.sealed..].trim().is_empty() {
                        m.text.push_str("\n\n");
                    }
                    m.text.push_str(&format!(":warning: {}", end.text));
                }
                self.flush(&mut m, true).await;
                self.set_status("").await;
                return turn;
            }
            match e.payload() {
                EventData::MessageReceived(_) if matches!(start, Start::AfterMessage) => {
                    armed = true;
                }
                EventData::ApprovalResolved(r) => {
                    if let Start::AfterApproval(call) = &start
                        && r.call_id == *call
                    {
                        armed = true;
                    }
                }
                EventData::TurnStarted(_) if armed && turn.is_none() => {
                    let Some(id) = e.turn_id.clone() else {
                        continue;
                    };
                    if !(self.claim)(&id) {
                        return None;
                    }
                    turn = Some(id);
                    self.set_status("is thinking…").await;
                }
                EventData::ActionsRequested(a) if ours => {
                    let tools: Vec<String> = a
                        .calls
                        .iter()
                        .map(|c| format!("`{}`", c.tool_name))
                        .collect();
                    if !tools.is_empty() {
                        self.set_status(&format!("is running {}…", tools.join(", ")))
                            .await;
                    }
                }
                EventData::MessageAppended(a) if ours && a.parent_call_id.is_none() => {
                    if m.separate && !m.text[m.sealed..].trim().is_empty() {
                        m.text.push_str("\n\n");
                    }
                    m.separate = false;
                    m.text.push_str(&a.delta);
                }
                EventData::MessageCompleted(c) if ours && c.parent_call_id.is_none() => {
                    m.separate = true;
                }
                EventData::ApprovalRequested(r) if ours && self.approvals => {
                    self.flush(&mut m, true).await;
                    self.post_card(&r.call_id, &r.tool_name, &r.input).await;
                    // Later text goes below the card.
                    m.sealed = m.text.len();
                    m.current = None;
                    m.shown.clear();
                }
                _ => {}
            }
        }
    }

    /// How long until the pending text may be written (`None`: nothing
    /// pending).
    fn next_flush(&self, m: &Messages) -> Option<Duration> {
        if m.text.len() == m.sealed || m.text[m.sealed..] == m.shown {
            return None;
        }
        Some(match m.last_edit {
            None => Duration::ZERO,
            Some(at) => self.interval.saturating_sub(at.elapsed()),
        })
    }

    /// Writes what is pending: full messages are finished and the rest
    /// goes to the current one. `last` retries a failed write and ends
    /// the current message's stream.
    async fn flush(&self, m: &mut Messages, last: bool) {
        loop {
            let rest = &m.text[m.sealed..];
            let (mut piece, full) = if rest.chars().count() > MESSAGE_LIMIT {
                (split_point(rest, MESSAGE_LIMIT), true)
            } else {
                (rest.len(), false)
            };
            // Streamed text cannot be taken back: a full message ends no
            // earlier than what its stream already shows.
            if full && m.streaming {
                piece = piece.max(m.shown.len());
            }
            let text = rest[..piece].to_owned();
            if text.trim().is_empty() && !full {
                break;
            }
            if text != m.shown || m.current.is_none() {
                let attempts = if last || full { FINAL_ATTEMPTS } else { 1 };
                if !self.write(m, &text, attempts).await {
                    // Left pending: the next flush tries again (a new
                    // message is never posted twice: `current` is set
                    // only once Slack answered).
                    m.last_edit = Some(Instant::now());
                    break;
                }
            }
            if !full {
                break;
            }
            self.finish(m).await;
            m.sealed += piece;
            m.current = None;
            m.shown.clear();
        }
        if last {
            self.finish(m).await;
        }
    }

    /// Ends the current message's stream (`chat.stopStream`), if it has one.
    async fn finish(&self, m: &mut Messages) {
        let (Some(ts), true) = (&m.current, m.streaming) else {
            return;
        };
        let body = json!({"channel": self.thread.channel, "ts": ts});
        for attempt in 0..FINAL_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
            }
            match self.api.call("chat.stopStream", &body).await {
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(session = %self.session, error = %e, "cannot end the Slack reply's stream")
                }
            }
        }
        m.streaming = false;
    }

    /// Posts, streams to or edits the current message; whether Slack took
    /// it.
    async fn write(&self, m: &mut Messages, text: &str, attempts: u32) -> bool {
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
            }
            let channel = &self.thread.channel;
            let result = match (&m.current, m.streaming) {
                (Some(ts), true) => {
                    let delta = text.get(m.shown.len()..).unwrap_or_default();
                    let body = json!({"channel": channel, "ts": ts, "markdown_text": delta});
                    self.api.call("chat.appendStream", &body).await.map(|_| ())
                }
                (Some(ts), false) => self.api.update(channel, ts, text, None).await,
                (None, _) => self.open(m, text).await,
            };
            match result {
                Ok(()) => {
                    m.shown = text.to_owned();
                    m.last_edit = Some(Instant::now());
                    return true;
                }
                Err(e) => {
                    tracing::warn!(session = %self.session, error = %e, "cannot write the Slack reply");
                }
            }
        }
        false
    }

    /// Starts a new message with `text`: a stream where the workspace has
    /// Slack's streaming methods, else a plain post (and, once streaming
    /// was refused, plain posts from then on).
    async fn open(&self, m: &mut Messages, text: &str) -> Result<(), ApiError> {
        let channel = &self.thread.channel;
        if self.streaming.load(Ordering::Relaxed) {
            let mut body = json!({"channel": channel, "thread_ts": self.thread.thread_ts, "markdown_text": text});
            if let Some((team, user)) = &self.recipient {
                body["recipient_team_id"] = json!(team);
                body["recipient_user_id"] = json!(user);
            }
            match self.api.call("chat.startStream", &body).await {
                Ok(v) => {
                    m.current = v.get("ts").and_then(Value::as_str).map(str::to_owned);
                    m.streaming = m.current.is_some();
                    return Ok(());
                }
                Err(e) if !e.is_transient() => {
                    tracing::info!(session = %self.session, error = %e, "Slack streaming is not available here: replies are posted and edited");
                    self.streaming.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        let ts = self
            .api
            .post(channel, Some(&self.thread.thread_ts), text, None)
            .await?;
        m.current = Some(ts);
        m.streaming = false;
        Ok(())
    }

    /// Sets (or with `""`, clears) the thread's status line. Best effort:
    /// outside an assistant thread Slack refuses it, which changes nothing.
    async fn set_status(&self, status: &str) {
        if !self.status {
            return;
        }
        let body = json!({"channel_id": self.thread.channel, "thread_ts": self.thread.thread_ts, "status": status});
        if let Err(e) = self.api.call("assistant.threads.setStatus", &body).await {
            tracing::debug!(session = %self.session, error = %e, "cannot set the thread's status");
        }
    }

    async fn post_card(&self, call: &str, tool: &str, input: &Value) {
        let blocks = approval_blocks(self.session, call, tool, input);
        let text = format!("Approval needed: `{tool}`");
        if let Err(e) = self
            .api
            .post(
                &self.thread.channel,
                Some(&self.thread.thread_ts),
                &text,
                Some(&blocks),
            )
            .await
        {
            tracing::warn!(session = %self.session, error = %e, "cannot post the Slack approval card");
        }
    }
}

/// Where to cut `text` so the first part has at most `limit` characters:
/// after the last line break in its second half, else the last space,
/// else exactly at the limit. A byte index on a char boundary.
pub(crate) fn split_point(text: &str, limit: usize) -> usize {
    if text.chars().count() <= limit {
        return text.len();
    }
    let hard = text
        .char_indices()
        .nth(limit)
        .map_or(text.len(), |(i, _)| i);
    let window = &text[..hard];
    let half = window.char_indices().nth(limit / 2).map_or(0, |(i, _)| i);
    if let Some(i) = window[half..].rfind('\n') {
        return half + i + 1;
    }
    if let Some(i) = window[half..].rfind(' ') {
        return half + i + 1;
    }
    hard
}

/// The action ids of the card's buttons.
pub(crate) const APPROVE_ACTION: &str = "agentkit_approve";
pub(crate) const DENY_ACTION: &str = "agentkit_deny";

/// How much of a call's arguments a card shows.
const CARD_ARGS_CHARS: usize = 1_500;

/// An Approve / Deny card. Each button's value carries the session and
/// call ids, so a click resolves the call even after a restart.
pub(crate) fn approval_blocks(session: &str, call: &str, tool: &str, input: &Value) -> Value {
    let mut args = serde_json::to_string_pretty(&redact(input)).unwrap_or_default();
    if args.chars().count() > CARD_ARGS_CHARS {
        args = args.chars().take(CARD_ARGS_CHARS).collect::<String>() + "\n… (truncated)";
    }
    let value = json!({"session": session, "call": call}).to_string();
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": format!("*Approval needed:* `{tool}`\n```{args}```")}},
        {"type": "actions", "block_id": "agentkit_approval", "elements": [
            {"type": "button", "action_id": APPROVE_ACTION, "style": "primary", "text": {"type": "plain_text", "text": "Approve"}, "value": value},
            {"type": "button", "action_id": DENY_ACTION, "style": "danger", "text": {"type": "plain_text", "text": "Deny"}, "value": value}
        ]}
    ])
}

/// The card once decided: the call and who decided, no buttons.
pub(crate) fn decided_blocks(tool_line: &str, approved: bool, user: &str) -> Value {
    let verdict = if approved {
        format!(":white_check_mark: Approved by <@{user}>")
    } else {
        format!(":no_entry: Denied by <@{user}>")
    };
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": tool_line}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": verdict}]}
    ])
}

/// Arguments with the values of secret-looking keys replaced.
fn redact(v: &Value) -> Value {
    const SECRET: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "api_key",
        "apikey",
        "authorization",
        "credential",
        "private_key",
    ];
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    if SECRET.iter().any(|s| lower.contains(s)) {
                        (k.clone(), json!("‹redacted›"))
                    } else {
                        (k.clone(), redact(v))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_splits_at_a_line_break_then_a_space_then_the_limit() {
        let text = format!("{}\n{}", "a".repeat(70), "b".repeat(50));
        assert_eq!(split_point(&text, 100), 71);
        let text = format!("{} {}", "a".repeat(70), "b".repeat(50));
        assert_eq!(split_point(&text, 100), 71);
        let text = "é".repeat(150);
        let cut = split_point(&text, 100);
        assert_eq!(text[..cut].chars().count(), 100);
        assert_eq!(split_point("short", 100), 5);
    }

    #[test]
    fn cards_redact_secret_arguments_and_carry_the_ids() {
        let blocks = approval_blocks(
            "s1",
            "c1",
            "deploy",
            &json!({"env": "prod", "api_token": "xoxb-secret", "nested": {"Password": "p"}}),
        );
        let text = blocks.to_string();
        assert!(
            !text.contains("xoxb-secret") && !text.contains("\\\"p\\\""),
            "{text}"
        );
        assert!(text.contains("prod"));
        let value: Value =
            serde_json::from_str(blocks[1]["elements"][0]["value"].as_str().unwrap_or(""))
                .unwrap_or(Value::Null);
        assert_eq!(value, json!({"session": "s1", "call": "c1"}));
    }
}
