//! The conversation the model sees is a fold over the session's events:
//! the event log is the single source of truth, so a restart loses nothing.

use std::collections::{BTreeSet, HashMap};

use agentkit_protocol::{Event, EventData, EventType, Message};
use serde_json::Value;

/// Folds `events` into the conversation so far. User messages count from
/// `message.received` (skipping the indices in `exclude`, which are the
/// messages of the turn about to run); assistant text and tool results
/// count only from turns that completed, because an interrupted or failed
/// turn may have stopped halfway through a step.
pub fn conversation(events: &[Event], exclude: &BTreeSet<u64>) -> Vec<Message> {
    conversation_with(events, exclude, None)
}

/// A turn still being looked into: its steps count as if it had completed,
/// and its user message (the messages it answers, joined as the harness
/// joins them) goes where the turn started.
pub(crate) struct OpenTurn<'a> {
    pub(crate) turn_id: &'a str,
    pub(crate) user_text: Option<String>,
    /// The images of the messages the turn answers, in their order.
    pub(crate) user_images: Vec<agentkit_protocol::ImageRef>,
}

/// [`conversation`] as a later step of `open` was sent it.
pub(crate) fn conversation_with(
    events: &[Event],
    exclude: &BTreeSet<u64>,
    open: Option<&OpenTurn<'_>>,
) -> Vec<Message> {
    let mut completed: BTreeSet<String> = open.map(|o| o.turn_id.to_owned()).into_iter().collect();
    completed_turns(events, &mut completed);
    let mut state = FoldState::default();
    state.fold(events, &completed, exclude, open);
    state.out
}

/// Adds the turns whose steps count to `completed`: those that completed,
/// and those a later turn resumes. A turn that a restart cut short while a
/// call waited for approval counts once a later turn resumes it: its steps
/// up to the parked call (and the results recorded on approval) are the
/// context of the resume.
fn completed_turns(events: &[Event], completed: &mut BTreeSet<String>) {
    for e in events {
        match e.event_type {
            EventType::TurnCompleted => completed.extend(e.turn_id.clone()),
            EventType::TurnStarted => {
                if let EventData::TurnStarted(started) = e.payload() {
                    completed.extend(started.resumes);
                }
            }
            _ => {}
        }
    }
}

/// The fold of a prefix of the log, from which it continues.
#[derive(Debug, Clone, Default)]
struct FoldState {
    out: Vec<Message>,
    /// Tool calls requested in a step attach to that step's assistant
    /// text, by turn.
    pending_text: HashMap<String, String>,
}

impl FoldState {
    fn fold(
        &mut self,
        events: &[Event],
        completed: &BTreeSet<String>,
        exclude: &BTreeSet<u64>,
        open: Option<&OpenTurn<'_>>,
    ) {
        let out = &mut self.out;
        for e in events {
            if let Some(open) = open
                && e.event_type == EventType::TurnStarted
                && e.turn_id.as_deref() == Some(open.turn_id)
                && let Some(text) = &open.user_text
            {
                out.push(Message::User {
                    text: text.clone(),
                    images: open.user_images.clone(),
                });
            }
            let in_completed_turn = e.turn_id.as_deref().filter(|t| completed.contains(*t));
            match (e.payload(), in_completed_turn) {
                (EventData::MessageReceived(m), _) if !exclude.contains(&e.index) => {
                    out.push(Message::User {
                        text: m.text,
                        images: m.images,
                    });
                }
                (EventData::MessageCompleted(m), Some(turn)) => {
                    if m.is_invalid_output() {
                        // Refused by the output schema and asked again.
                    } else if m.is_tool_call() {
                        self.pending_text.insert(turn.to_owned(), m.text);
                    } else {
                        out.push(Message::Assistant {
                            text: m.text,
                            tool_calls: Vec::new(),
                        });
                    }
                }
                (EventData::ActionsRequested(a), Some(turn)) => {
                    out.push(Message::Assistant {
                        text: self.pending_text.remove(turn).unwrap_or_default(),
                        tool_calls: a.calls,
                    });
                }
                (EventData::ActionResult(r), Some(_)) => out.push(Message::Tool {
                    call_id: r.call_id,
                    tool_name: r.tool_name,
                    output: r.output,
                    is_error: r.is_error,
                }),
                // A compaction holds whatever became of its turn: the
                // summary replaces the messages it covered in every later
                // request.
                (EventData::ContextCompacted(c), _) => {
                    out.drain(..c.messages.min(out.len()));
                    out.insert(0, agentkit_harness::summary_message(&c.summary));
                }
                _ => {}
            }
        }
    }
}

/// The fold of the cache's first `pos` events, kept so the next turn folds
/// only what came after: a turn's cost then grows with what it adds, not
/// with the session's history (after a compaction, the memo holds the
/// summary and the recent turns, however long the log).
#[derive(Debug, Clone, Default)]
struct Memo {
    pos: usize,
    /// The log index of the first event past the prefix.
    next_index: u64,
    state: FoldState,
    /// Turns whose steps counted when the memo was made.
    completed: BTreeSet<String>,
    /// Turns with events in the prefix that did not count then: if a later
    /// event completes or resumes one, its steps count after all and the
    /// memo no longer holds.
    unsettled: BTreeSet<String>,
}

impl Memo {
    /// Whether the memo is the fold of its prefix as a fold of `events`
    /// (the whole cache) skipping `exclude` would see it.
    fn holds(&self, events: &[Event], exclude: &BTreeSet<u64>) -> bool {
        if self.pos > events.len() || exclude.range(..self.next_index).next().is_some() {
            return false;
        }
        events[self.pos..].iter().all(|e| match e.event_type {
            EventType::TurnCompleted => e
                .turn_id
                .as_deref()
                .is_none_or(|t| !self.unsettled.contains(t)),
            EventType::TurnStarted => match e.payload() {
                EventData::TurnStarted(t) => t
                    .resumes
                    .as_deref()
                    .is_none_or(|r| !self.unsettled.contains(r)),
                _ => true,
            },
            _ => true,
        })
    }
}

/// What the session's turns used so far: completed and failed turns (the
/// summarisation requests of compactions are part of their turn's).
pub(crate) fn usage(events: &[Event]) -> agentkit_protocol::Usage {
    let mut total = agentkit_protocol::Usage::default();
    for e in events {
        match e.payload() {
            EventData::TurnCompleted(t) => total += t.usage,
            EventData::TurnFailed(t) => total += t.usage.unwrap_or_default(),
            _ => {}
        }
    }
    total
}

/// What the session's ended turns cost in US dollars: the sum of the
/// known costs, and whether every turn that used tokens had one (a turn
/// of a model with no price, or one recorded before costs were, did not).
pub(crate) fn cost(events: &[Event]) -> (f64, bool) {
    let zero = agentkit_protocol::Usage::default();
    let (mut known, mut complete) = (0.0, true);
    for e in events {
        let (usage, cost) = match e.payload() {
            EventData::TurnCompleted(t) => (t.usage, t.cost_usd),
            EventData::TurnFailed(t) => (t.usage.unwrap_or_default(), t.cost_usd),
            _ => continue,
        };
        match cost {
            Some(c) => known += c,
            None if usage != zero => complete = false,
            None => {}
        }
    }
    (agentkit_harness::pricing::round(known), complete)
}

/// What the session's completed turns estimated and the provider counted
/// of their requests: calibrates the next turn's estimates.
pub(crate) fn sizing(events: &[Event]) -> agentkit_protocol::Sizing {
    let mut total = agentkit_protocol::Sizing::default();
    for e in events {
        if e.event_type == EventType::TurnCompleted
            && let Some(s) = e.data.get("sizing")
            && let Ok(s) = serde_json::from_value::<agentkit_protocol::Sizing>(s.clone())
        {
            total += s;
        }
    }
    total
}

/// The snapshot format: its kept events are those [`keeps`] names. A
/// snapshot of another version (one written before the kept set grew) is
/// not read: the log is read instead, and the next snapshot replaces it.
const SNAPSHOT_VERSION: u32 = 2;

/// Does the fold (or the approvals list, the calls waiting for the
/// client, or recovery) read events of this
/// type? Deltas, step boundaries and subagent notes are left out of the
/// cache: they are most of a log and none of the conversation.
pub(crate) fn keeps(t: EventType) -> bool {
    matches!(
        t,
        EventType::MessageReceived
            | EventType::AbAssigned
            | EventType::MessageCompleted
            | EventType::ActionsRequested
            | EventType::ActionResult
            | EventType::ActionApprovalRequested
            | EventType::ActionApprovalResolved
            | EventType::ActionsClientRequested
            | EventType::TurnStarted
            | EventType::TurnCompleted
            | EventType::TurnFailed
            | EventType::ContextCompacted
            | EventType::SessionWaiting
            | EventType::SessionCompleted
            | EventType::SessionFailed
    )
}

/// The events of one session that [`conversation`], the approvals list
/// and recovery read, kept up to date incrementally: each refresh reads
/// only what was appended since the last one, so a turn's cost does not
/// grow with the length of the log. Dropped when the session goes cold
/// and rebuilt (from the log) when it is addressed again.
#[derive(Debug, Default)]
pub(crate) struct FoldCache {
    /// The cache holds the kept events of `0..upto`.
    loaded: bool,
    upto: u64,
    events: Vec<Event>,
    /// The `upto` of the snapshot on disk (0: none).
    saved: u64,
    /// The fold of a prefix of `events` (none until the first turn).
    memo: Option<Memo>,
}

/// A snapshot is written once this many events were appended since the
/// last one (and at least a quarter of the log since then, so rewriting
/// the snapshot costs a constant amount per event however long the
/// session grows): a one-turn session never pays for one, and a restart
/// reads at most a fifth of a long log past its snapshot.
pub(crate) const SNAPSHOT_EVERY: u64 = 256;

/// The first line of a snapshot file.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SnapshotHeader {
    /// The format ([`SNAPSHOT_VERSION`]).
    snapshot: u32,
    session: String,
    /// The kept events of `0..upto` follow, one per line.
    upto: u64,
    /// How many lines follow (a file cut at a line's end is refused too).
    events: usize,
}

impl FoldCache {
    /// The cache of a session created just now: it holds the whole (empty)
    /// log, so the events the runtime records can be handed to it as they
    /// are appended and no turn needs to read the log.
    pub(crate) fn new_session() -> FoldCache {
        FoldCache {
            loaded: true,
            upto: 0,
            events: Vec::new(),
            saved: 0,
            memo: None,
        }
    }

    /// Takes events just appended, when they follow on from what the
    /// cache holds (otherwise the next refresh reads them from the log).
    pub(crate) fn push<E: std::borrow::Borrow<Event>>(&mut self, appended: &[E]) {
        if !self.loaded || appended.first().map(|e| e.borrow().index) != Some(self.upto) {
            return;
        }
        for event in appended {
            let event: &Event = event.borrow();
            if event.index != self.upto {
                return;
            }
            self.upto += 1;
            if keeps(event.event_type) {
                self.keep(event.clone());
            }
        }
    }

    /// Holds `event` if the fold reads its type.
    fn keep(&mut self, mut event: Event) {
        if !keeps(event.event_type) {
            return;
        }
        // The result of a completed turn repeats its last message; only
        // the turn id, the usage, the sizing and the cost matter here.
        if event.event_type == EventType::TurnCompleted {
            let mut kept = serde_json::Map::new();
            for key in ["usage", "sizing", "costUsd"] {
                if let Some(v) = event.data.get(key) {
                    kept.insert(key.to_owned(), v.clone());
                }
            }
            event.data = if kept.is_empty() {
                Value::Null
            } else {
                Value::Object(kept)
            };
        }
        self.events.push(event);
    }

    /// Whether the cache holds anything (a cold session's does not).
    pub(crate) fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// Where the next refresh reads from.
    pub(crate) fn upto(&self) -> u64 {
        if self.loaded { self.upto } else { 0 }
    }

    /// Adds the events read from [`upto`](Self::upto) on.
    pub(crate) fn extend(&mut self, read: Vec<Event>) {
        if !self.loaded {
            self.loaded = true;
            self.upto = 0;
            self.events.clear();
            self.memo = None;
        }
        for event in read {
            if event.index < self.upto {
                continue;
            }
            self.upto = event.index + 1;
            self.keep(event);
        }
    }

    /// The kept events, in index order.
    pub(crate) fn events(&self) -> &[Event] {
        &self.events
    }

    /// [`conversation`] of the kept events, folding only what was appended
    /// since the last call: the fold up to the last turn's start (or the
    /// first excluded message, if earlier) is kept for the next call. A
    /// memo that a later event invalidates (a turn it left out completes,
    /// or an excluded message lies inside it) is dropped and the whole
    /// cache folded again.
    pub(crate) fn conversation(&mut self, exclude: &BTreeSet<u64>) -> Vec<Message> {
        let events = &self.events;
        let memo = self.memo.take().filter(|m| m.holds(events, exclude));
        let mut memo = memo.unwrap_or_default();
        let tail = &events[memo.pos..];
        completed_turns(tail, &mut memo.completed);
        // The next memo ends where this turn's input starts: its first
        // excluded message or the last turn's start, whichever is earlier.
        let first_excluded = tail.iter().position(|e| exclude.contains(&e.index));
        let last_started = tail
            .iter()
            .rposition(|e| e.event_type == EventType::TurnStarted);
        let cut = match (first_excluded, last_started) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(tail.len()),
        };
        let (before, after) = tail.split_at(cut);
        memo.state.fold(before, &memo.completed, exclude, None);
        for e in before {
            if let Some(t) = e.turn_id.as_deref()
                && !memo.completed.contains(t)
            {
                memo.unsettled.insert(t.to_owned());
            }
        }
        memo.pos += cut;
        memo.next_index = events.get(memo.pos).map_or(self.upto, |e| e.index);
        let mut state = memo.state.clone();
        state.fold(after, &memo.completed, exclude, None);
        self.memo = Some(memo);
        state.out
    }

    /// Enough was appended since the last snapshot to write a new one.
    pub(crate) fn snapshot_due(&self) -> bool {
        self.loaded && self.upto.saturating_sub(self.saved) >= SNAPSHOT_EVERY.max(self.saved / 4)
    }

    /// The snapshot file's bytes: a header line, then the kept events.
    pub(crate) fn encode(&self, session: &str) -> serde_json::Result<Vec<u8>> {
        let mut out = serde_json::to_vec(&SnapshotHeader {
            snapshot: SNAPSHOT_VERSION,
            session: session.to_owned(),
            upto: self.upto,
            events: self.events.len(),
        })?;
        out.push(b'\n');
        for event in &self.events {
            serde_json::to_writer(&mut out, event)?;
            out.push(b'\n');
        }
        Ok(out)
    }

    /// Records that the snapshot of `0..upto` is on disk.
    pub(crate) fn mark_saved(&mut self, upto: u64) {
        self.saved = self.saved.max(upto);
    }

    /// Reads a snapshot file of `session`. `None` when it is not one (a
    /// torn or foreign file): the caller reads the log instead.
    pub(crate) fn decode(bytes: &[u8], session: &str) -> Option<(u64, Vec<Event>)> {
        let mut lines = bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        let header: SnapshotHeader = serde_json::from_slice(lines.next()?).ok()?;
        if header.snapshot != SNAPSHOT_VERSION || header.session != session {
            return None;
        }
        let mut events = Vec::new();
        for line in lines {
            let event: Event = serde_json::from_slice(line).ok()?;
            if event.index >= header.upto
                || events
                    .last()
                    .is_some_and(|e: &Event| e.index >= event.index)
            {
                return None;
            }
            events.push(event);
        }
        (events.len() == header.events).then_some((header.upto, events))
    }

    /// Starts a cold cache from a snapshot of `0..upto`.
    pub(crate) fn restore(&mut self, upto: u64, events: Vec<Event>) {
        self.loaded = true;
        self.upto = upto;
        self.saved = upto;
        self.events = events;
        self.memo = None;
    }
}

/// The client tools of the messages `turn` answered, following the
/// turns it resumed back to the one a message started (a later
/// message's declaration of a name wins).
pub(crate) fn resumed_client_tools(
    events: &[Event],
    turn: &str,
) -> Vec<agentkit_protocol::ClientTool> {
    let mut turn = turn.to_owned();
    // A chain of resumes is short; the bound only guards a damaged log.
    for _ in 0..64 {
        let started = events.iter().find_map(|e| match e.event_type {
            EventType::TurnStarted if e.turn_id.as_deref() == Some(turn.as_str()) => {
                match e.payload() {
                    EventData::TurnStarted(t) => Some(t),
                    _ => None,
                }
            }
            _ => None,
        });
        let Some(started) = started else {
            return Vec::new();
        };
        if started.received.is_empty() {
            match started.resumes {
                Some(earlier) => {
                    turn = earlier;
                    continue;
                }
                None => return Vec::new(),
            }
        }
        let mut tools: Vec<agentkit_protocol::ClientTool> = Vec::new();
        for e in events.iter().filter(|e| {
            e.event_type == EventType::MessageReceived && started.received.contains(&e.index)
        }) {
            if let EventData::MessageReceived(m) = e.payload() {
                for tool in m.client_tools {
                    tools.retain(|t| t.name != tool.name);
                    tools.push(tool);
                }
            }
        }
        return tools;
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use agentkit_protocol::SessionId;
    use serde_json::json;

    fn e(index: u64, t: EventType, turn: Option<&str>, data: Value) -> Event {
        Event {
            event_type: t,
            index,
            session_id: SessionId::parse("s").unwrap(),
            turn_id: turn.map(str::to_owned),
            at: String::new(),
            data,
        }
    }

    fn log() -> Vec<Event> {
        vec![
            e(0, EventType::SessionStarted, None, json!({})),
            e(1, EventType::MessageReceived, None, json!({"text": "q1"})),
            e(2, EventType::TurnStarted, Some("t1"), json!({})),
            e(
                3,
                EventType::MessageAppended,
                Some("t1"),
                json!({"delta": "a"}),
            ),
            e(
                4,
                EventType::MessageCompleted,
                Some("t1"),
                json!({"text": "a", "finishReason": "tool_call"}),
            ),
            e(
                5,
                EventType::ActionsRequested,
                Some("t1"),
                json!({"calls": [{"callId": "c", "toolName": "x", "input": {}}]}),
            ),
            e(
                6,
                EventType::ActionApprovalRequested,
                Some("t1"),
                json!({"callId": "c", "toolName": "x", "input": {}}),
            ),
            e(
                7,
                EventType::TurnFailed,
                Some("t1"),
                json!({"reason": "restart"}),
            ),
            e(8, EventType::SessionWaiting, None, json!({})),
            e(
                9,
                EventType::ActionApprovalResolved,
                Some("t1"),
                json!({"callId": "c"}),
            ),
            e(
                10,
                EventType::ActionResult,
                Some("t1"),
                json!({"callId": "c", "toolName": "x", "output": "ok"}),
            ),
            e(
                11,
                EventType::TurnStarted,
                Some("t2"),
                json!({"resumes": "t1"}),
            ),
            e(12, EventType::StepStarted, Some("t2"), json!({"step": 1})),
            e(
                13,
                EventType::MessageCompleted,
                Some("t2"),
                json!({"text": "done", "finishReason": "stop"}),
            ),
            e(
                14,
                EventType::TurnCompleted,
                Some("t2"),
                json!({"result": "done"}),
            ),
            e(15, EventType::MessageReceived, None, json!({"text": "q2"})),
            e(16, EventType::TurnStarted, Some("t3"), json!({})),
            e(
                17,
                EventType::MessageCompleted,
                Some("t3"),
                json!({"text": "cut", "finishReason": "stop"}),
            ),
        ]
    }

    /// A resumed turn offers the client tools of the messages the turn it
    /// resumes answered, through a chain of resumes; a later message's
    /// declaration of a name wins.
    #[test]
    fn a_resumed_turn_offers_the_client_tools_of_the_turn_it_resumes() {
        let tool = |name: &str, description: &str| json!({"name": name, "description": description, "parameters": {"type": "object"}});
        let events = vec![
            e(
                0,
                EventType::MessageReceived,
                None,
                json!({"text": "a", "clientTools": [tool("pick", "old"), tool("ask", "")]}),
            ),
            e(
                1,
                EventType::MessageReceived,
                None,
                json!({"text": "b", "clientTools": [tool("pick", "new")]}),
            ),
            e(
                2,
                EventType::TurnStarted,
                Some("t1"),
                json!({"received": [0, 1]}),
            ),
            e(
                3,
                EventType::TurnStarted,
                Some("t2"),
                json!({"resumes": "t1"}),
            ),
            e(
                4,
                EventType::TurnStarted,
                Some("t3"),
                json!({"resumes": "t2"}),
            ),
            e(5, EventType::MessageReceived, None, json!({"text": "c"})),
            e(
                6,
                EventType::TurnStarted,
                Some("t4"),
                json!({"received": [5]}),
            ),
        ];
        let names = |turn: &str| {
            resumed_client_tools(&events, turn)
                .into_iter()
                .map(|t| format!("{}:{}", t.name, t.description))
                .collect::<Vec<_>>()
        };
        assert_eq!(names("t3"), ["ask:", "pick:new"]);
        assert_eq!(names("t2"), names("t3"));
        assert!(names("t4").is_empty());
        assert!(names("unknown").is_empty());
    }

    #[test]
    fn the_cache_folds_like_the_whole_log_however_it_was_read() {
        let all = log();
        let exclude = BTreeSet::from([15]);
        let whole = conversation(&all, &exclude);
        assert_eq!(whole.len(), 4, "{whole:?}");
        for split in 0..all.len() {
            let mut cache = FoldCache::default();
            assert_eq!(cache.upto(), 0);
            cache.extend(all[..split].to_vec());
            // A refresh reads from `upto`; an overlap is ignored.
            cache.extend(all[split.saturating_sub(1)..].to_vec());
            // Events handed over as they are appended fold the same.
            let mut fed = FoldCache::new_session();
            fed.push(&all[..split]);
            fed.push(&all[split..split.saturating_add(1).min(all.len())]);
            fed.push(&all[split.saturating_add(3).min(all.len())..]);
            let read = fed.upto();
            fed.extend(all[read as usize..].to_vec());
            assert_eq!(
                conversation(fed.events(), &exclude),
                whole,
                "fed, split {split}"
            );
            assert_eq!(cache.upto(), all.len() as u64);
            assert_eq!(
                conversation(cache.events(), &exclude),
                whole,
                "split {split}"
            );
            assert!(cache.events().iter().all(|e| keeps(e.event_type)));
        }
    }

    /// The memoised fold equals the whole fold at every point of the log's
    /// growth, whatever the turn about to run excludes, including when an
    /// event invalidates the memo (a turn cut short is resumed later).
    #[test]
    fn the_memoised_fold_is_the_whole_fold_as_the_log_grows() {
        let all = log();
        let excludes: Vec<BTreeSet<u64>> =
            vec![BTreeSet::new(), BTreeSet::from([1]), BTreeSet::from([15])];
        for exclude in &excludes {
            let mut cache = FoldCache::new_session();
            for n in 0..=all.len() {
                let upto = cache.upto() as usize;
                cache.push(&all[upto..n]);
                assert_eq!(
                    cache.conversation(exclude),
                    conversation(&all[..n], exclude),
                    "after {n} events, excluding {exclude:?}"
                );
            }
            // Asked again with another exclusion, still the whole fold.
            for other in &excludes {
                assert_eq!(cache.conversation(other), conversation(&all, other));
            }
        }
        // A long run of turns: the memo moves to each turn's start.
        let mut long = vec![all[0].clone()];
        let mut cache = FoldCache::new_session();
        for t in 0..50u64 {
            let i = long.len() as u64;
            let e = |k: u64, ty: EventType, turn: bool, data: Value| Event {
                event_type: ty,
                index: i + k,
                session_id: SessionId::parse("s").unwrap(),
                turn_id: turn.then(|| format!("t{t}")),
                at: String::new(),
                data,
            };
            long.push(e(
                0,
                EventType::MessageReceived,
                false,
                json!({"text": format!("q{t}")}),
            ));
            long.push(e(1, EventType::TurnStarted, true, json!({})));
            let exclude = BTreeSet::from([i]);
            cache.push(&long[cache.upto() as usize..]);
            assert_eq!(cache.conversation(&exclude), conversation(&long, &exclude));
            long.push(e(
                2,
                EventType::MessageCompleted,
                true,
                json!({"text": format!("a{t}"), "finishReason": "stop"}),
            ));
            long.push(e(3, EventType::TurnCompleted, true, json!({"result": "a"})));
        }
        cache.push(&long[cache.upto() as usize..]);
        assert_eq!(cache.conversation(&BTreeSet::new()).len(), 100);
        assert!(cache.memo.as_ref().unwrap().pos > 190, "the memo moved on");
    }

    #[test]
    fn a_snapshot_restores_the_cache_and_refuses_foreign_or_torn_files() {
        let all = log();
        let exclude = BTreeSet::from([15]);
        let whole = conversation(&all, &exclude);
        for split in 0..=all.len() {
            let mut cache = FoldCache::new_session();
            cache.push(&all[..split]);
            let bytes = cache.encode("s").unwrap();
            let (upto, events) = FoldCache::decode(&bytes, "s").unwrap();
            assert_eq!(upto, split as u64);
            let mut cold = FoldCache::default();
            cold.restore(upto, events);
            cold.extend(all[cold.upto() as usize..].to_vec());
            assert_eq!(
                conversation(cold.events(), &exclude),
                whole,
                "split {split}"
            );
            assert!(!cold.snapshot_due());
            assert!(FoldCache::decode(&bytes, "other").is_none());
            if bytes.len() > 2 {
                let torn = &bytes[..bytes.len() - 2];
                assert!(
                    FoldCache::decode(torn, "s").is_none(),
                    "torn, split {split}"
                );
                let cut = bytes.len()
                    - 1
                    - bytes[..bytes.len() - 1]
                        .iter()
                        .rev()
                        .position(|b| *b == b'\n')
                        .unwrap_or(0);
                if cut < bytes.len() - 1 && !cache.events().is_empty() {
                    assert!(
                        FoldCache::decode(&bytes[..cut], "s").is_none(),
                        "cut at a line's end, split {split}"
                    );
                }
            }
        }
    }
}
