//! Every expectation of a turn checked against what the turn did: each
//! gives a [`CheckResult`] with what was expected and what was seen, pass
//! or fail, so a report shows all of them, not the first failure.

use agentkit_client::trajectory::{Turn, TurnStatus};
use agentkit_manifest::{CalledTool, Expect, FileExpect};
use serde_json::Value;

use crate::report::{CheckResult, ToolCallSeen};

/// How much of a reply or file a check quotes.
const EXCERPT_CHARS: usize = 300;

/// The checks of `expect` that need no model and no files: success, tool
/// calls, tool order, the reply's text, regex and schema.
pub fn check_turn(expect: &Expect, turn: &Turn) -> Vec<CheckResult> {
    let mut out = Vec::new();
    let calls = seen_calls(turn);
    let calls_text = calls_summary(&calls);
    if let Some(want) = expect.succeeded {
        let ok = turn.status == TurnStatus::Completed;
        let seen = match (&turn.status, &turn.error) {
            (TurnStatus::Completed, _) => "the turn completed".to_owned(),
            (TurnStatus::Failed, Some(e)) => format!("the turn failed: {e}"),
            (TurnStatus::Failed, None) => "the turn failed".to_owned(),
            (TurnStatus::Running, _) => "the turn never ended".to_owned(),
        };
        let expected = if want {
            "the turn succeeds"
        } else {
            "the turn fails"
        };
        out.push(result(
            "succeeded",
            ok == want,
            expected.to_owned(),
            seen.clone(),
            format!("expected {expected}; {seen}"),
        ));
    }
    for want in &expect.called_tool {
        let name = want.name();
        let (expected, passed) = match want {
            CalledTool::Name(_) => (
                format!("`{name}` is called"),
                calls.iter().any(|c| c.tool_name == name),
            ),
            CalledTool::WithInput { input, .. } => {
                let shown: Vec<String> =
                    input.iter().map(|(k, v)| format!("{k} ~ /{v}/")).collect();
                (
                    format!("`{name}` is called with {}", shown.join(", ")),
                    calls
                        .iter()
                        .any(|c| c.tool_name == name && input_matches(&c.input, input)),
                )
            }
        };
        out.push(result(
            "called_tool",
            passed,
            expected.clone(),
            calls_text.clone(),
            format!("expected {expected}; calls: {calls_text}"),
        ));
    }
    for name in &expect.not_called_tool {
        let passed = !calls.iter().any(|c| &c.tool_name == name);
        let expected = format!("`{name}` is not called");
        out.push(result(
            "not_called_tool",
            passed,
            expected.clone(),
            calls_text.clone(),
            format!("expected {expected}; calls: {calls_text}"),
        ));
    }
    if !expect.tool_order.is_empty() {
        let names: Vec<&str> = calls.iter().map(|c| c.tool_name.as_str()).collect();
        let mut want = expect.tool_order.iter().peekable();
        for n in &names {
            if want.peek().is_some_and(|w| w == n) {
                want.next();
            }
        }
        let passed = want.peek().is_none();
        let expected = format!(
            "tools called in the order {}",
            expect.tool_order.join(" → ")
        );
        let seen = if names.is_empty() {
            "no calls".to_owned()
        } else {
            names.join(" → ")
        };
        out.push(result(
            "tool_order",
            passed,
            expected.clone(),
            seen.clone(),
            format!("expected {expected}; saw {seen}"),
        ));
    }
    if let Some(reply) = &expect.reply {
        let text = turn.reply.as_deref().unwrap_or("");
        let seen = match &turn.reply {
            Some(t) => excerpt(t),
            None => "(no reply)".to_owned(),
        };
        if let Some(needle) = &reply.contains {
            let expected = format!("the reply contains {needle:?}");
            out.push(result(
                "reply.contains",
                text.contains(needle.as_str()),
                expected.clone(),
                seen.clone(),
                format!("expected {expected}; the reply was {seen:?}"),
            ));
        }
        if let Some(pattern) = &reply.matches {
            let expected = format!("the reply matches /{pattern}/");
            let passed = regex::Regex::new(pattern).is_ok_and(|r| r.is_match(text));
            out.push(result(
                "reply.matches",
                passed,
                expected.clone(),
                seen.clone(),
                format!("expected {expected}; the reply was {seen:?}"),
            ));
        }
        if let Some(schema) = &reply.json_schema {
            out.push(check_schema(schema, text, &seen));
        }
    }
    if let Some(want) = &expect.output {
        let expected = format!("the structured output holds {want}");
        let (passed, seen) = match &turn.output {
            Some(got) => (holds(got, want), excerpt(&got.to_string())),
            None => (
                false,
                "(no structured output: give the case an `output_schema`, or the agent one)"
                    .to_owned(),
            ),
        };
        out.push(result(
            "output",
            passed,
            expected.clone(),
            seen.clone(),
            format!("expected {expected}; saw {seen}"),
        ));
    }
    out
}

/// Whether `got` holds `want`: an object holds at least `want`'s keys,
/// each holding its value; anything else is equal (numbers by value, so
/// `1` and `1.0` agree).
fn holds(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Object(got), Value::Object(want)) => want
            .iter()
            .all(|(k, w)| got.get(k).is_some_and(|g| holds(g, w))),
        (Value::Array(got), Value::Array(want)) => {
            got.len() == want.len() && got.iter().zip(want).all(|(g, w)| holds(g, w))
        }
        (Value::Number(g), Value::Number(w)) => g.as_f64() == w.as_f64(),
        _ => got == want,
    }
}

fn check_schema(schema: &Value, text: &str, seen: &str) -> CheckResult {
    let expected = "the reply is JSON matching the schema".to_owned();
    let doc = json_of(text);
    let (passed, why) = match doc {
        None => (false, "the reply is not JSON".to_owned()),
        Some(doc) => match agentkit_manifest::schema_errors(schema, &doc) {
            Ok(errors) if errors.is_empty() => (true, String::new()),
            Ok(errors) => (
                false,
                errors
                    .iter()
                    .map(|(at, e)| {
                        if at.is_empty() {
                            e.clone()
                        } else {
                            format!("{at}: {e}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            Err(e) => (false, format!("the schema does not compile: {e}")),
        },
    };
    result(
        "reply.json_schema",
        passed,
        expected.clone(),
        seen.to_owned(),
        format!("expected {expected}; {why} (the reply was {seen:?})"),
    )
}

/// The reply as JSON: the whole text, or a fenced ```json block in it.
fn json_of(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(v) = serde_json::from_str(t) {
        return Some(v);
    }
    let start = t.find("```")?;
    let rest = &t[start + 3..];
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    let end = rest.find("```")?;
    serde_json::from_str(rest[..end].trim()).ok()
}

/// Checks one file of the workspace; `content` is `None` when it does not
/// exist.
pub fn check_file(want: &FileExpect, content: Option<&str>) -> Vec<CheckResult> {
    let path = &want.path;
    let mut out = Vec::new();
    let seen = match content {
        None => "(no such file)".to_owned(),
        Some(c) => excerpt(c),
    };
    let exists = content.is_some();
    if want.exists != exists || (want.contains.is_none() && want.matches.is_none()) {
        let expected = if want.exists {
            format!("`{path}` exists")
        } else {
            format!("`{path}` does not exist")
        };
        out.push(result(
            "file",
            want.exists == exists,
            expected.clone(),
            seen.clone(),
            format!(
                "expected {expected}; it {}",
                if exists { "does" } else { "does not" }
            ),
        ));
    }
    if !want.exists {
        return out;
    }
    let text = content.unwrap_or("");
    if let Some(needle) = &want.contains {
        let expected = format!("`{path}` contains {needle:?}");
        out.push(result(
            "file",
            exists && text.contains(needle.as_str()),
            expected.clone(),
            seen.clone(),
            format!("expected {expected}; it holds {seen:?}"),
        ));
    }
    if let Some(pattern) = &want.matches {
        let expected = format!("`{path}` matches /{pattern}/");
        out.push(result(
            "file",
            exists && regex::Regex::new(pattern).is_ok_and(|r| r.is_match(text)),
            expected.clone(),
            seen.clone(),
            format!("expected {expected}; it holds {seen:?}"),
        ));
    }
    out
}

pub(crate) fn seen_calls(turn: &Turn) -> Vec<ToolCallSeen> {
    turn.tool_calls
        .iter()
        .map(|c| ToolCallSeen {
            tool_name: c.tool_name.clone(),
            input: c.input.clone(),
            is_error: c.is_error,
        })
        .collect()
}

fn calls_summary(calls: &[ToolCallSeen]) -> String {
    if calls.is_empty() {
        return "no tools were called".to_owned();
    }
    calls
        .iter()
        .map(|c| format!("{}({})", c.tool_name, c.input))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Each field's string form matches its regex.
fn input_matches(input: &Value, want: &std::collections::BTreeMap<String, String>) -> bool {
    want.iter().all(|(field, pattern)| {
        let Some(v) = input.get(field) else {
            return false;
        };
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        regex::Regex::new(pattern).is_ok_and(|r| r.is_match(&text))
    })
}

pub(crate) fn result(
    kind: &str,
    passed: bool,
    expected: String,
    seen: String,
    message: String,
) -> CheckResult {
    CheckResult {
        kind: kind.to_owned(),
        passed,
        expected,
        seen,
        message: if passed { String::new() } else { message },
        judge: None,
    }
}

/// The first characters of `text`, on one line.
pub(crate) fn excerpt(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(EXCERPT_CHARS) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}

#[cfg(test)]
mod tests {
    use agentkit_client::trajectory::ToolCall;
    use agentkit_manifest::TextMatch;
    use serde_json::json;

    use super::*;

    fn turn(reply: &str, calls: &[(&str, Value)]) -> Turn {
        Turn {
            reply: Some(reply.to_owned()),
            status: TurnStatus::Completed,
            tool_calls: calls
                .iter()
                .map(|(n, i)| ToolCall {
                    tool_name: n.to_string(),
                    input: i.clone(),
                    ..ToolCall::default()
                })
                .collect(),
            ..Turn::default()
        }
    }

    #[test]
    fn the_structured_output_must_hold_the_expected_values() {
        let expect = Expect {
            output: Some(json!({"severity": "high", "labels": ["db"], "score": 1})),
            ..Expect::default()
        };
        let mut t = turn("{}", &[]);
        let check = |t: &Turn| check_turn(&expect, t).remove(0);
        let missing = check(&t);
        assert!(!missing.passed, "{missing:?}");
        assert!(missing.seen.contains("no structured output"), "{missing:?}");
        t.output = Some(json!({"severity": "high", "labels": ["db"], "score": 1.0, "extra": true}));
        assert!(check(&t).passed, "{:?}", check(&t));
        t.output = Some(json!({"severity": "low", "labels": ["db"], "score": 1}));
        assert!(!check(&t).passed);
        t.output = Some(json!({"severity": "high", "labels": ["db", "api"], "score": 1}));
        assert!(!check(&t).passed, "arrays are compared whole");
    }

    #[test]
    fn every_expectation_is_reported() {
        let expect = Expect {
            succeeded: Some(true),
            called_tool: vec![
                CalledTool::Name("get_weather".into()),
                CalledTool::WithInput {
                    name: "get_weather".into(),
                    input: [("city".to_owned(), "^Par".to_owned())].into(),
                },
            ],
            not_called_tool: vec!["post_alert".into()],
            tool_order: vec!["convert".into(), "get_weather".into()],
            reply: Some(TextMatch {
                contains: Some("Oslo".into()),
                matches: Some("(?i)sunny".into()),
                json_schema: Some(json!({"type": "object"})),
                ..TextMatch::default()
            }),
            ..Expect::default()
        };
        let t = turn(
            "It is sunny in Paris.",
            &[
                ("get_weather", json!({"city": "Paris"})),
                ("post_alert", json!({})),
            ],
        );
        let checks = check_turn(&expect, &t);
        let verdicts: Vec<(&str, bool)> =
            checks.iter().map(|c| (c.kind.as_str(), c.passed)).collect();
        assert_eq!(
            verdicts,
            [
                ("succeeded", true),
                ("called_tool", true),
                ("called_tool", true),
                ("not_called_tool", false),
                ("tool_order", false),
                ("reply.contains", false),
                ("reply.matches", true),
                ("reply.json_schema", false),
            ]
        );
        assert_eq!(
            checks[5].message,
            "expected the reply contains \"Oslo\"; the reply was \"It is sunny in Paris.\""
        );
        assert_eq!(checks[4].seen, "get_weather → post_alert");
    }

    #[test]
    fn schemas_read_fenced_json_and_files_are_checked() {
        let expect = Expect {
            reply: Some(TextMatch {
                json_schema: Some(json!({"type": "object", "required": ["temp"]})),
                ..TextMatch::default()
            }),
            ..Expect::default()
        };
        let ok = check_turn(&expect, &turn("```json\n{\"temp\": 3}\n```", &[]));
        assert!(ok[0].passed, "{ok:?}");
        let bad = check_turn(&expect, &turn("{\"t\": 3}", &[]));
        assert!(!bad[0].passed);
        assert!(bad[0].message.contains("temp"), "{}", bad[0].message);

        let want = FileExpect {
            path: "notes.md".into(),
            exists: true,
            contains: Some("Paris".into()),
            matches: Some("^- ".into()),
        };
        let c = check_file(&want, Some("- Paris: sunny\n"));
        assert!(c.iter().all(|c| c.passed), "{c:?}");
        let c = check_file(&want, None);
        assert_eq!(c.iter().filter(|c| !c.passed).count(), 3, "{c:?}");
        let gone = FileExpect {
            path: "x".into(),
            exists: false,
            contains: None,
            matches: None,
        };
        assert!(check_file(&gone, None)[0].passed);
        assert!(!check_file(&gone, Some(""))[0].passed);
    }
}
