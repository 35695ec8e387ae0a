//! A2A 0.3's JSON-RPC methods (`message/send`, `message/stream`,
//! `tasks/get`, `tasks/cancel`, `tasks/resubscribe`), served by the 1.0
//! operations: their params are rewritten into 1.0's shapes and the
//! answers back into 0.3's (`kind` discriminators, lowercase states such
//! as `input-required`, `final` on the last status update).

use serde_json::{Map, Value, json};

/// The 1.0 method a 0.3 method is.
pub(crate) fn method(name: &str) -> Option<&'static str> {
    Some(match name {
        "message/send" => "SendMessage",
        "message/stream" => "SendStreamingMessage",
        "tasks/get" => "GetTask",
        "tasks/cancel" => "CancelTask",
        "tasks/resubscribe" => "SubscribeToTask",
        _ => return None,
    })
}

/// 0.3 params in 1.0's shape (only a message's parts and role differ;
/// `configuration.blocking: false` is `returnImmediately`).
pub(crate) fn params(params: Option<Value>) -> Option<Value> {
    let Some(Value::Object(mut p)) = params else {
        return params;
    };
    if let Some(Value::Object(m)) = p.get_mut("message") {
        upgrade_message(m);
    }
    if let Some(Value::Object(c)) = p.get_mut("configuration")
        && let Some(blocking) = c.remove("blocking").and_then(|b| b.as_bool())
    {
        c.insert("returnImmediately".to_owned(), Value::Bool(!blocking));
    }
    Some(Value::Object(p))
}

fn upgrade_message(m: &mut Map<String, Value>) {
    m.remove("kind");
    let role = match m.get("role").and_then(Value::as_str) {
        Some("agent") => "ROLE_AGENT",
        _ => "ROLE_USER",
    };
    m.insert("role".to_owned(), json!(role));
    if let Some(Value::Array(parts)) = m.get_mut("parts") {
        for part in parts.iter_mut() {
            let Value::Object(p) = part else { continue };
            p.remove("kind");
            if let Some(Value::Object(file)) = p.remove("file") {
                if let Some(uri) = file.get("uri") {
                    p.insert("url".to_owned(), uri.clone());
                }
                if let Some(bytes) = file.get("bytes") {
                    p.insert("raw".to_owned(), bytes.clone());
                }
                if let Some(name) = file.get("name") {
                    p.insert("filename".to_owned(), name.clone());
                }
                if let Some(mime) = file.get("mimeType") {
                    p.insert("mediaType".to_owned(), mime.clone());
                }
            }
        }
    }
}

/// A 1.0 answer in 0.3's shape: `SendMessage`'s `{task}` is the task
/// itself.
pub(crate) fn result(method: &str, v: Value) -> Value {
    match (method, v) {
        ("SendMessage", Value::Object(mut o)) => o.remove("task").map_or(Value::Null, task),
        (_, v) => task(v),
    }
}

/// A 1.0 stream event in 0.3's shape.
pub(crate) fn event(v: Value) -> Value {
    let Value::Object(mut o) = v else { return v };
    if let Some(t) = o.remove("task") {
        return task(t);
    }
    if let Some(Value::Object(mut u)) = o.remove("statusUpdate") {
        let state = u["status"]["state"].as_str().unwrap_or_default().to_owned();
        if let Some(status) = u.remove("status") {
            u.insert("status".to_owned(), status_03(status));
        }
        u.insert("kind".to_owned(), json!("status-update"));
        let last = matches!(
            state.as_str(),
            "TASK_STATE_COMPLETED"
                | "TASK_STATE_FAILED"
                | "TASK_STATE_CANCELED"
                | "TASK_STATE_REJECTED"
                | "TASK_STATE_INPUT_REQUIRED"
                | "TASK_STATE_AUTH_REQUIRED"
        );
        u.insert("final".to_owned(), json!(last));
        return Value::Object(u);
    }
    if let Some(Value::Object(mut u)) = o.remove("artifactUpdate") {
        if let Some(a) = u.remove("artifact") {
            u.insert("artifact".to_owned(), artifact_03(a));
        }
        u.insert("kind".to_owned(), json!("artifact-update"));
        return Value::Object(u);
    }
    Value::Object(o)
}

fn task(v: Value) -> Value {
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

fn status_03(v: Value) -> Value {
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

fn artifact_03(v: Value) -> Value {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn shapes_go_both_ways() {
        let p = params(Some(json!({
            "message": {"kind": "message", "messageId": "m", "role": "user",
                        "parts": [{"kind": "text", "text": "hi"}, {"kind": "file", "file": {"uri": "https://x/y", "name": "y"}}]},
            "configuration": {"blocking": false}
        })))
        .unwrap();
        assert_eq!(
            p,
            json!({
                "message": {"messageId": "m", "role": "ROLE_USER",
                            "parts": [{"text": "hi"}, {"url": "https://x/y", "filename": "y"}]},
                "configuration": {"returnImmediately": true}
            })
        );
        let answer = result(
            "SendMessage",
            json!({"task": {"id": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                           "message": {"messageId": "x", "role": "ROLE_AGENT", "parts": [{"text": "ok?"}]}}}}),
        );
        assert_eq!(
            answer,
            json!({"kind": "task", "id": "t", "contextId": "c",
                "status": {"state": "input-required",
                           "message": {"kind": "message", "messageId": "x", "role": "agent", "parts": [{"kind": "text", "text": "ok?"}]}}})
        );
        let update = event(json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}}));
        assert_eq!(update["kind"], "status-update");
        assert_eq!(update["final"], true);
        assert_eq!(update["status"]["state"], "completed");
    }
}
