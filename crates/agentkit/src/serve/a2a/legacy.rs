//! A2A 0.3's JSON-RPC methods (`message/send`, `message/stream`,
//! `tasks/get`, `tasks/cancel`, `tasks/resubscribe`,
//! `tasks/pushNotificationConfig/{set,get,list,delete}`,
//! `agent/getAuthenticatedExtendedCard`), served by the 1.0 operations:
//! their params are rewritten into 1.0's shapes and the answers back into
//! 0.3's (`kind` discriminators, lowercase states such as
//! `input-required`, `final` on the last status update, a push config
//! nested in `pushNotificationConfig`, a card with one `url`).

use serde_json::{Map, Value, json};

use super::super::turn_task::wire_03::{artifact_03, status_03, task_03 as task};

/// The 1.0 method a 0.3 method is.
pub(crate) fn method(name: &str) -> Option<&'static str> {
    Some(match name {
        "message/send" => "SendMessage",
        "message/stream" => "SendStreamingMessage",
        "tasks/get" => "GetTask",
        "tasks/cancel" => "CancelTask",
        "tasks/resubscribe" => "SubscribeToTask",
        "tasks/pushNotificationConfig/set" => "CreateTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/get" => "GetTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/list" => "ListTaskPushNotificationConfigs",
        "tasks/pushNotificationConfig/delete" => "DeleteTaskPushNotificationConfig",
        "agent/getAuthenticatedExtendedCard" => "GetExtendedAgentCard",
        _ => return None,
    })
}

/// 0.3 params of `method` (by its 1.0 name) in 1.0's shape: a message's
/// parts and role differ, `configuration.blocking: false` is
/// `returnImmediately`, and a push config's task is `id` (its config
/// `pushNotificationConfigId`) or the config is nested.
pub(crate) fn params(method: &str, params: Option<Value>) -> Option<Value> {
    let Some(Value::Object(mut p)) = params else {
        return params;
    };
    match method {
        "CreateTaskPushNotificationConfig" => return Some(push_config_10(p)),
        "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => {
            let task = p.remove("id").unwrap_or(Value::Null);
            // 0.3 names a task's only config after the task.
            let config = p
                .remove("pushNotificationConfigId")
                .unwrap_or_else(|| task.clone());
            let mut out = json!({"taskId": task});
            if method != "ListTaskPushNotificationConfigs" {
                out["id"] = config;
            }
            return Some(out);
        }
        _ => {}
    }
    if let Some(Value::Object(m)) = p.get_mut("message") {
        upgrade_message(m);
    }
    if let Some(Value::Object(c)) = p.get_mut("configuration") {
        if let Some(blocking) = c.remove("blocking").and_then(|b| b.as_bool()) {
            c.insert("returnImmediately".to_owned(), Value::Bool(!blocking));
        }
        // 0.3's webhook for the message's task, flat as 1.0's.
        if let Some(push) = c.remove("pushNotificationConfig") {
            let flat = push_config_10(
                [("pushNotificationConfig".to_owned(), push)]
                    .into_iter()
                    .collect(),
            );
            c.insert("taskPushNotificationConfig".to_owned(), flat);
        }
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

/// `{taskId, pushNotificationConfig: {id, url, token, authentication:
/// {schemes, credentials}}}` as 1.0's flat config (the first scheme);
/// a config without `id` is named after its task, as 0.3 servers do.
fn push_config_10(mut p: Map<String, Value>) -> Value {
    // None in a message's configuration: its task is not started yet.
    let task = p.remove("taskId").filter(Value::is_string);
    let mut config = match p.remove("pushNotificationConfig") {
        Some(Value::Object(c)) => c,
        _ => Map::new(),
    };
    if let Some(task) = &task
        && config
            .get("id")
            .is_none_or(|id| id.as_str().is_none_or(str::is_empty))
    {
        config.insert("id".to_owned(), task.clone());
    }
    if let Some(Value::Object(mut auth)) = config.remove("authentication") {
        let scheme = auth
            .remove("schemes")
            .and_then(|s| s.get(0).cloned())
            .unwrap_or_else(|| json!(""));
        auth.insert("scheme".to_owned(), scheme);
        config.insert("authentication".to_owned(), Value::Object(auth));
    }
    if let Some(task) = task {
        config.insert("taskId".to_owned(), task);
    }
    Value::Object(config)
}

/// A 1.0 push config in 0.3's shape.
fn push_config_03(v: Value) -> Value {
    let Value::Object(mut c) = v else { return v };
    let task = c.remove("taskId").unwrap_or(Value::Null);
    c.remove("tenant");
    if let Some(Value::Object(mut auth)) = c.remove("authentication") {
        let scheme = auth.remove("scheme").unwrap_or(Value::Null);
        auth.insert("schemes".to_owned(), json!([scheme]));
        c.insert("authentication".to_owned(), Value::Object(auth));
    }
    json!({"taskId": task, "pushNotificationConfig": c})
}

/// A 1.0 answer of `method` in 0.3's shape: `SendMessage`'s `{task}` is
/// the task itself, a list of configs a bare array, a deletion `null`.
pub(crate) fn result(method: &str, v: Value) -> Value {
    match (method, v) {
        ("SendMessage", Value::Object(mut o)) => o.remove("task").map_or(Value::Null, task),
        ("CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig", v) => {
            push_config_03(v)
        }
        ("ListTaskPushNotificationConfigs", Value::Object(mut o)) => match o.remove("configs") {
            Some(Value::Array(configs)) => configs.into_iter().map(push_config_03).collect(),
            _ => json!([]),
        },
        ("DeleteTaskPushNotificationConfig", _) => Value::Null,
        ("GetExtendedAgentCard", v) => card_03(v),
        (_, v) => task(v),
    }
}

/// A 1.0 agent card in 0.3's shape: the JSON-RPC interface is `url`
/// (`preferredTransport` `JSONRPC`, the HTTP+JSON one an additional
/// interface), and the security schemes carry `type`.
fn card_03(v: Value) -> Value {
    let Value::Object(mut c) = v else { return v };
    let interfaces = match c.remove("supportedInterfaces") {
        Some(Value::Array(i)) => i,
        _ => Vec::new(),
    };
    let url = interfaces
        .iter()
        .find(|i| i["protocolBinding"] == "JSONRPC")
        .map(|i| i["url"].clone())
        .unwrap_or(Value::Null);
    c.insert("url".to_owned(), url);
    c.insert("preferredTransport".to_owned(), json!("JSONRPC"));
    c.insert("protocolVersion".to_owned(), json!("0.3.0"));
    c.insert(
        "additionalInterfaces".to_owned(),
        interfaces
            .iter()
            .map(|i| json!({"url": i["url"], "transport": i["protocolBinding"]}))
            .collect(),
    );
    if let Some(Value::Object(caps)) = c.get_mut("capabilities")
        && let Some(extended) = caps.remove("extendedAgentCard")
    {
        c.insert("supportsAuthenticatedExtendedCard".to_owned(), extended);
    }
    if let Some(Value::Object(schemes)) = c.remove("securitySchemes") {
        let schemes: Map<String, Value> = schemes
            .into_iter()
            .map(|(name, scheme)| (name, scheme_03(scheme)))
            .collect();
        c.insert("securitySchemes".to_owned(), Value::Object(schemes));
    }
    if let Some(Value::Array(reqs)) = c.remove("securityRequirements") {
        let security: Vec<Value> = reqs
            .into_iter()
            .map(|r| match r.get("schemes") {
                Some(Value::Object(s)) => s.keys().map(|k| (k.clone(), json!([]))).collect(),
                _ => json!({}),
            })
            .collect();
        c.insert("security".to_owned(), Value::Array(security));
    }
    Value::Object(c)
}

/// `{httpAuthSecurityScheme: {…}}` as `{type: "http", …}` (and the API
/// key scheme as `apiKey`, its `location` as `in`).
fn scheme_03(v: Value) -> Value {
    let Value::Object(o) = v else { return v };
    let Some((kind, Value::Object(mut inner))) = o.into_iter().next() else {
        return json!({});
    };
    let kind = match kind.as_str() {
        "httpAuthSecurityScheme" => "http",
        "apiKeySecurityScheme" => {
            if let Some(location) = inner.remove("location") {
                inner.insert("in".to_owned(), location);
            }
            "apiKey"
        }
        "oauth2SecurityScheme" => "oauth2",
        "openIdConnectSecurityScheme" => "openIdConnect",
        _ => "mutualTLS",
    };
    inner.insert("type".to_owned(), json!(kind));
    Value::Object(inner)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn shapes_go_both_ways() {
        let p = params(
            "SendMessage",
            Some(json!({
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
        // A message's webhook (its task not started yet), and a config
        // set without an id: named after its task.
        let p = params(
            "SendMessage",
            Some(json!({"message": {"parts": []}, "configuration": {"pushNotificationConfig":
                {"url": "https://h/x", "authentication": {"schemes": ["Bearer"], "credentials": "c"}}}})),
        )
        .unwrap();
        assert_eq!(
            p["configuration"],
            json!({"taskPushNotificationConfig": {"url": "https://h/x",
                "authentication": {"scheme": "Bearer", "credentials": "c"}}})
        );
        let set = params(
            "CreateTaskPushNotificationConfig",
            Some(json!({"taskId": "t", "pushNotificationConfig": {"url": "https://h/x"}})),
        )
        .unwrap();
        assert_eq!(set, json!({"taskId": "t", "id": "t", "url": "https://h/x"}));
        assert_eq!(
            result("CreateTaskPushNotificationConfig", set),
            json!({"taskId": "t", "pushNotificationConfig": {"id": "t", "url": "https://h/x"}})
        );
        let get = params("GetTaskPushNotificationConfig", Some(json!({"id": "t"}))).unwrap();
        assert_eq!(get, json!({"taskId": "t", "id": "t"}));
        let update = event(json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}}));
        assert_eq!(update["kind"], "status-update");
        assert_eq!(update["final"], true);
        assert_eq!(update["status"]["state"], "completed");
    }
}
