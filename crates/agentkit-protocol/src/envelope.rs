//! The event envelope: one NDJSON line of a session stream, and the session
//! id that names the stream.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::EventType;

/// The longest session id we accept, in bytes.
const MAX_SESSION_ID_LEN: usize = 128;

/// The id of a session: one safe path segment, `[A-Za-z0-9_-]{1,128}`.
///
/// Ids become directory names (`sessions/<id>/`), so a value that could
/// climb out of the state root (`..`, `a/b`) or hide (`.x`) never gets a
/// `SessionId`. Every way in — [`SessionId::parse`] and deserialization —
/// checks the same rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

/// A string that is not a valid session id, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSessionId {
    /// The rejected value (cut to a readable length).
    pub value: String,
    /// Why it was rejected.
    pub reason: &'static str,
}

impl SessionId {
    /// Checks `s` and wraps it.
    pub fn parse(s: &str) -> Result<SessionId, InvalidSessionId> {
        let reason = if s.is_empty() {
            Some("is empty")
        } else if s.len() > MAX_SESSION_ID_LEN {
            Some("is longer than 128 bytes")
        } else if !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            Some("may contain only ASCII letters, digits, `_` and `-`")
        } else {
            None
        };
        match reason {
            None => Ok(SessionId(s.to_owned())),
            Some(reason) => Err(InvalidSessionId {
                value: s.chars().take(64).collect(),
                reason,
            }),
        }
    }

    /// The id as text, safe to use as one path segment.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for InvalidSessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid session id `{}`: {}", self.value, self.reason)
    }
}

impl std::error::Error for InvalidSessionId {}

impl std::str::FromStr for SessionId {
    type Err = InvalidSessionId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SessionId::parse(s)
    }
}

impl Serialize for SessionId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        SessionId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for SessionId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SessionId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[A-Za-z0-9_-]{1,128}$",
            "description": "A session id: one safe path segment."
        })
    }
}

/// One event of a session stream, as written to `events.ndjson` and sent to
/// subscribers: `{"type","index","sessionId","turnId"?,"at","data"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// What happened.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// The position in the session's stream, counting from 0 with no gaps.
    pub index: u64,
    /// The session the event belongs to.
    pub session_id: SessionId,
    /// The turn the event belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// When the event was appended, ISO-8601 UTC (`2026-11-29T21:04:05.123Z`).
    pub at: String,
    /// The event's payload; its shape depends on `type`.
    pub data: Value,
}

impl Event {
    /// The envelope (type, index, session, turn, time) with a `null`
    /// payload: for writing the same event with a different `data`.
    pub fn clone_envelope(&self) -> Event {
        Event {
            event_type: self.event_type,
            index: self.index,
            session_id: self.session_id.clone(),
            turn_id: self.turn_id.clone(),
            at: self.at.clone(),
            data: Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn event(turn_id: Option<&str>) -> Event {
        Event {
            event_type: EventType::TurnStarted,
            index: 7,
            session_id: SessionId::parse("ses_abc-1").unwrap(),
            turn_id: turn_id.map(str::to_owned),
            at: "2026-11-29T21:04:05.123Z".to_owned(),
            data: serde_json::json!({"b": 1, "a": 2}),
        }
    }

    #[test]
    fn envelope_keys_are_named_and_ordered_as_on_the_wire() {
        let json = serde_json::to_string(&event(Some("turn_1"))).unwrap();
        assert_eq!(
            json,
            r#"{"type":"turn.started","index":7,"sessionId":"ses_abc-1","turnId":"turn_1","at":"2026-11-29T21:04:05.123Z","data":{"b":1,"a":2}}"#
        );
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back, event(Some("turn_1")));
    }

    #[test]
    fn envelope_omits_absent_turn_id() {
        let json = serde_json::to_string(&event(None)).unwrap();
        assert_eq!(
            json,
            r#"{"type":"turn.started","index":7,"sessionId":"ses_abc-1","at":"2026-11-29T21:04:05.123Z","data":{"b":1,"a":2}}"#
        );
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back.turn_id, None);
    }

    #[test]
    fn envelope_rejects_unsafe_session_id_on_deserialize() {
        let json = r#"{"type":"turn.started","index":0,"sessionId":"../x","at":"t","data":null}"#;
        let err = serde_json::from_str::<Event>(json).unwrap_err();
        assert!(err.to_string().contains("invalid session id"), "{err}");
    }

    #[test]
    fn session_id_accepts_one_safe_segment() {
        for ok in ["a", "ses_01HZ-x", "A9", &"x".repeat(128)] {
            let id = SessionId::parse(ok).unwrap();
            assert_eq!(id.as_str(), ok);
            assert_eq!(id.to_string(), ok);
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(json, format!("\"{ok}\""));
            assert_eq!(serde_json::from_str::<SessionId>(&json).unwrap(), id);
        }
    }

    #[test]
    fn session_id_rejects_anything_that_is_not_one_safe_segment() {
        let long = "x".repeat(129);
        for bad in [
            "", ".", "..", "../x", "a/b", "a\\b", "a.b", ".hidden", "a b", "é", "a\0", &long,
        ] {
            assert!(SessionId::parse(bad).is_err(), "accepted {bad:?}");
            let json = serde_json::to_string(bad).unwrap();
            assert!(serde_json::from_str::<SessionId>(&json).is_err(), "{bad:?}");
        }
        let err = SessionId::parse("a/b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid session id `a/b`: may contain only ASCII letters, digits, `_` and `-`"
        );
    }
}
