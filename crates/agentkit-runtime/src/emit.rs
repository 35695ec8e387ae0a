//! Assistant text appended without a model turn (the channel helper
//! `emit_assistant_message`): a host task that already produced the final
//! text, or a greeting, records it as a short turn of its own so that
//! every client of the stream and the conversation fold read it like any
//! other reply.

use agentkit_events::NewEvent;
use agentkit_protocol::{Appended, EventData, MessageCompleted, TurnCompleted, TurnStarted, Usage};

use crate::error::{Error, Result};
use crate::meta::SessionMode;
use crate::runtime::AgentRuntime;
use crate::tool_call::Release;
use crate::util::new_id;

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
        let meta = self.session_meta(id).await?;
        if meta.mode == SessionMode::Task {
            return Err(Error::TaskSession { id: id.to_owned() });
        }
        let session = self.sessions().get(id).await?;
        let session = self.turns().claim_idle(&session).await?;
        let guard = Release {
            runtime: self,
            session: session.clone(),
        };
        let turn = new_id("turn");
        let event = |data| NewEvent::new(Some(turn.clone()), data);
        let emitted = || Some("emitted".to_owned());
        let events = vec![
            event(EventData::TurnStarted(TurnStarted {
                messages: 0,
                kind: emitted(),
                ..TurnStarted::default()
            })),
            event(EventData::MessageAppended(Appended {
                delta: text.to_owned(),
                text: Some(text.to_owned()),
                parent_call_id: None,
            })),
            event(EventData::MessageCompleted(MessageCompleted {
                text: text.to_owned(),
                ..MessageCompleted::default()
            })),
            event(EventData::TurnCompleted(TurnCompleted {
                result: text.to_owned(),
                usage: Usage::default(),
                kind: emitted(),
                // No model ran: nothing was spent.
                cost_usd: Some(0.0),
                ..TurnCompleted::default()
            })),
            NewEvent::new(None, EventData::SessionWaiting),
        ];
        self.store().append_batch(&session.id, events).await?;
        self.store().sync(&session.id).await?;
        drop(guard);
        Ok(turn)
    }
}
