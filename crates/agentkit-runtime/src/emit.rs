//! Assistant text appended without a model turn (the channel helper
//! `emit_assistant_message`): a host task that already produced the final
//! text, or a greeting, records it as a short turn of its own so that
//! every client of the stream and the conversation fold read it like any
//! other reply.

use agentkit_events::NewEvent;
use agentkit_protocol::{EventType, Usage};
use serde_json::json;

use crate::error::{Error, Result};
use crate::meta::SessionMode;
use crate::runtime::{AgentRuntime, new_id};
use crate::tool_call::Release;

impl AgentRuntime {
    /// Appends `text` as the assistant's final reply in chat session `id`,
    /// whoever owns it (channels authenticate their callers themselves):
    /// `turn.started` (`kind: "emitted"`), `message.appended`,
    /// `message.completed`, `turn.completed` with the text as `result` and
    /// zero usage, then `session.waiting`. No model is called. Returns the
    /// turn id.
    ///
    /// A session running a turn (or with messages queued) answers
    /// `session_busy` (409) rather than queueing: the text would otherwise
    /// land after a reply it was meant to precede. A task session answers
    /// `task_session`.
    pub async fn emit_assistant_message(&self, id: &str, text: &str) -> Result<String> {
        if text.trim().is_empty() {
            return Err(Error::BadRequest {
                message: "the assistant message must not be empty".into(),
            });
        }
        let meta = self.meta_of(id)?;
        if meta.mode == SessionMode::Task {
            return Err(Error::TaskSession { id: id.to_owned() });
        }
        let session = self.get_session(id)?;
        let session = self.claim_idle(&session).await?;
        let guard = Release {
            runtime: self,
            session: session.clone(),
        };
        let turn = new_id("turn");
        let event = |event_type, data| NewEvent {
            event_type,
            turn_id: Some(turn.clone()),
            data,
        };
        let events = vec![
            event(
                EventType::TurnStarted,
                json!({"messages": 0, "kind": "emitted"}),
            ),
            event(
                EventType::MessageAppended,
                json!({"delta": text, "text": text}),
            ),
            event(
                EventType::MessageCompleted,
                json!({"text": text, "finishReason": "stop"}),
            ),
            event(
                EventType::TurnCompleted,
                json!({"result": text, "usage": Usage::default(), "kind": "emitted"}),
            ),
            NewEvent {
                event_type: EventType::SessionWaiting,
                turn_id: None,
                data: json!({}),
            },
        ];
        self.store().append_batch(&session.id, events).await?;
        self.store().sync(&session.id).await?;
        drop(guard);
        Ok(turn)
    }
}
