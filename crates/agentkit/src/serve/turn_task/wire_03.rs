//! A2A 0.3's shape of a task (`kind` discriminators, lowercase states
//! such as `input-required`, `kind`ed messages and parts), from 1.0's:
//! what the 0.3 methods answer (`a2a/legacy.rs`) and what a webhook
//! registered through them is sent (`push.rs`).

use serde_json::{Value, json};

/// A 1.0 task in 0.3's shape: `kind: "task"`, lowercase states,
/// `kind`ed messages and parts.
pub(crate) fn task_03(v: Value) -> Value {
    let Value::Object(mut t) = v else { return v };
    t.insert("kind".to_owned(), json!("task"));
    if let Some(status) = t.remove("status") {
        t.insert("status".to_owned(), status_03(status));
    }
    for (key, f) in [
        ("artifacts", artifact_03 as fn(Value) -> Value),
        ("history", message_03),
    ] {
        if let Some(Value::Array(items)) = t.remove(key) {
            t.insert(key.to_owned(), items.into_iter().map(f).collect());
        }
    }
    Value::Object(t)
}

/// A 1.0 `TaskStatus` in 0.3's shape.
pub(crate) fn status_03(v: Value) -> Value {
    let Value::Object(mut s) = v else { return v };
    if let Some(state) = s.get("state").and_then(Value::as_str) {
        let old = state
            .trim_start_matches("TASK_STATE_")
            .to_ascii_lowercase()
            .replace('_', "-");
        s.insert("state".to_owned(), json!(old));
    }
    if let Some(m) = s.remove("message") {
        s.insert("message".to_owned(), message_03(m));
    }
    Value::Object(s)
}

fn message_03(v: Value) -> Value {
    let Value::Object(mut m) = v else { return v };
    m.insert("kind".to_owned(), json!("message"));
    let role = match m.get("role").and_then(Value::as_str) {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    };
    m.insert("role".to_owned(), json!(role));
    if let Some(Value::Array(parts)) = m.remove("parts") {
        m.insert("parts".to_owned(), parts.into_iter().map(part_03).collect());
    }
    Value::Object(m)
}

/// A 1.0 `Artifact` in 0.3's shape (its parts `kind`ed).
pub(crate) fn artifact_03(v: Value) -> Value {
    let Value::Object(mut a) = v else { return v };
    if let Some(Value::Array(parts)) = a.remove("parts") {
        a.insert("parts".to_owned(), parts.into_iter().map(part_03).collect());
    }
    Value::Object(a)
}

fn part_03(v: Value) -> Value {
    let Value::Object(p) = v else { return v };
    if let Some(text) = p.get("text") {
        return json!({"kind": "text", "text": text});
    }
    if let Some(data) = p.get("data") {
        return json!({"kind": "data", "data": data});
    }
    Value::Object(p)
}
