//! The `test` provider: offline and deterministic, like pydantic-ai's
//! TestModel.
//!
//! Step 1 of every turn (unless it resumes after tool results) calls each server tool of the agent once, with
//! arguments generated from its input schema (see [`example_input`]); an
//! agent without server tools skips straight to the answer. The next step
//! answers with a summary that quotes the user's message and lists each
//! call and its (truncated) result. Usage is approximated at four
//! characters per token.

use agentkit_protocol::{Message, ToolCall, Usage};
use serde_json::{Map, Value};

use super::{ModelReply, StepRequest, StepSink, approx_tokens, chunk_text};

/// How much of each tool result the summary quotes.
const RESULT_PREVIEW_CHARS: usize = 200;

pub(super) async fn step(request: &StepRequest<'_>, sink: &mut StepSink<'_>) -> ModelReply {
    let input_tokens = request.approx_input_tokens();
    // A turn that resumes after tool results (an approval resolved after a
    // restart) has its results already: it goes straight to the answer.
    let fresh = matches!(request.conversation.last(), Some(Message::User { .. }));
    if request.step == 1 && fresh {
        // The agent's server tools, then Rust and MCP tools whose names
        // are still free.
        let mut tools: Vec<(&str, &Value)> = request
            .agent
            .tools
            .iter()
            .filter(|t| t.offered_to_model())
            .map(|t| (t.name.as_str(), &t.input_schema))
            .collect();
        for t in request.tools {
            let spec = t.spec();
            if request.agent.tool(&spec.name).is_none() {
                tools.push((spec.name.as_str(), &spec.input_schema));
            }
        }
        let calls: Vec<ToolCall> = tools
            .into_iter()
            .enumerate()
            .map(|(i, (name, schema))| ToolCall {
                call_id: request.call_id(i),
                tool_name: name.to_owned(),
                input: example_input(schema),
            })
            .collect();
        if !calls.is_empty() {
            let chars = serde_json::to_string(&calls).map_or(0, |s| s.len());
            return ModelReply {
                tool_calls: calls,
                usage: Usage {
                    input_tokens,
                    output_tokens: approx_tokens(chars),
                    ..Usage::default()
                },
            };
        }
    }
    let text = summary(request);
    for chunk in chunk_text(&text, 4) {
        sink.text(chunk).await;
    }
    ModelReply {
        tool_calls: Vec::new(),
        usage: Usage {
            input_tokens,
            output_tokens: approx_tokens(text.len()),
            ..Usage::default()
        },
    }
}

/// "You said: …" and one line per tool call of this turn.
fn summary(request: &StepRequest<'_>) -> String {
    let this_turn = request
        .conversation
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .map_or(request.conversation, |i| &request.conversation[i + 1..]);
    let calls: Vec<&ToolCall> = this_turn
        .iter()
        .filter_map(|m| match m {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    let mut text = format!("You said: {}", request.user_text());
    if calls.is_empty() {
        text.push_str("\nI called no tools.");
    }
    for m in this_turn {
        let Message::Tool {
            call_id,
            tool_name,
            output,
            is_error,
        } = m
        else {
            continue;
        };
        let input = calls
            .iter()
            .find(|c| &c.call_id == call_id)
            .map_or_else(String::new, |c| c.input.to_string());
        let output = match output {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let marker = if *is_error { " (error)" } else { "" };
        text.push_str(&format!(
            "\nI called {tool_name}({input}) → {}{marker}",
            truncate(&output, RESULT_PREVIEW_CHARS)
        ));
    }
    text
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// A value that satisfies the simple parts of a JSON Schema: the first
/// `examples` entry, `const`, the first `enum` value or `default` when
/// present; otherwise by type (strings "example", numbers and integers 1
/// or their minimum, booleans true, arrays empty unless `minItems`, objects
/// with their required properties filled in).
pub(crate) fn example_input(schema: &Value) -> Value {
    example(schema, 0)
}

fn example(schema: &Value, depth: usize) -> Value {
    let Some(obj) = schema.as_object() else {
        return Value::String("example".into());
    };
    if let Some(v) = obj
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        return v.clone();
    }
    if let Some(v) = obj.get("const") {
        return v.clone();
    }
    if let Some(v) = obj
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        return v.clone();
    }
    if let Some(v) = obj.get("default") {
        return v.clone();
    }
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if obj.contains_key("properties") => "object",
        _ => "string",
    };
    match ty {
        "string" => {
            let min = obj.get("minLength").and_then(Value::as_u64).unwrap_or(0);
            let mut s = String::from("example");
            while (s.len() as u64) < min {
                s.push('x');
            }
            Value::String(s)
        }
        "integer" => obj
            .get("minimum")
            .and_then(Value::as_i64)
            .map_or(Value::from(1), |m| Value::from(m.max(1))),
        "number" => obj
            .get("minimum")
            .filter(|m| m.is_number())
            .cloned()
            .map_or(Value::from(1), |m| {
                if m.as_f64().is_some_and(|f| f > 1.0) {
                    m
                } else {
                    Value::from(1)
                }
            }),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        "array" => {
            let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = obj.get("items").cloned().unwrap_or(Value::Bool(true));
            let items = if depth < 8 {
                (0..min.min(16))
                    .map(|_| example(&item, depth + 1))
                    .collect()
            } else {
                Vec::new()
            };
            Value::Array(items)
        }
        _ => {
            let mut out = Map::new();
            if depth < 8 {
                let props = obj.get("properties").and_then(Value::as_object);
                let required = obj.get("required").and_then(Value::as_array);
                for name in required.into_iter().flatten().filter_map(Value::as_str) {
                    let prop = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                    out.insert(name.to_owned(), example(prop, depth + 1));
                }
            }
            Value::Object(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn examples_fill_required_properties_by_type() {
        let schema = json!({
            "type": "object",
            "required": ["city", "n", "x", "ok", "tags", "unit", "nested", "sev", "name"],
            "properties": {
                "city": {"type": "string", "minLength": 1},
                "n": {"type": "integer"},
                "x": {"type": "number", "minimum": 5},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "unit": {"type": "string", "enum": ["F", "C"]},
                "nested": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}},
                "sev": {"type": "string", "default": "advisory"},
                "name": {"type": "string", "examples": ["Ada"]},
                "optional": {"type": "string"}
            }
        });
        assert_eq!(
            example_input(&schema),
            json!({
                "city": "example", "n": 1, "x": 5, "ok": true, "tags": [],
                "unit": "F", "nested": {"a": 1}, "sev": "advisory", "name": "Ada"
            })
        );
        assert_eq!(
            example_input(&json!({"type": "string", "minLength": 9})),
            json!("examplexx")
        );
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("hi", 2), "hi");
    }
}
