//! Structured output: a turn under an `output_schema` ends only with a
//! reply that parses as JSON (a Markdown code fence around it is allowed)
//! and validates against the schema; otherwise the model is told what was
//! wrong and asked again, at most [`RETRIES`] times.

use serde_json::Value;

/// How many times a reply that does not match is sent back.
pub(crate) const RETRIES: u32 = 2;

/// The JSON inside ```json … ``` (or ``` … ```), else the text itself.
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// The reply as a value valid against `schema`, or what is wrong with it.
pub(crate) fn check(schema: &Value, text: &str) -> Result<Value, String> {
    let value: Value =
        serde_json::from_str(unfenced(text)).map_err(|e| format!("the reply is not JSON ({e})"))?;
    let errors = agentkit_manifest::schema_errors(schema, &value)
        .map_err(|e| format!("the output schema cannot be compiled: {e}"))?;
    if errors.is_empty() {
        return Ok(value);
    }
    Err(errors
        .iter()
        .map(|(path, message)| format!("{}: {message}", if path.is_empty() { "/" } else { path }))
        .collect::<Vec<_>>()
        .join("; "))
}

/// What the model is told after a reply that did not match.
pub(crate) fn retry_prompt(errors: &str) -> String {
    format!(
        "Your reply does not match the required output schema: {errors}. Reply again with only the JSON value, no prose and no code fence."
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn replies_parse_validate_and_explain() {
        let schema = json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
        assert_eq!(
            check(&schema, r#"{"city": "Paris"}"#).unwrap(),
            json!({"city": "Paris"})
        );
        assert_eq!(
            check(&schema, "```json\n{\"city\": \"Oslo\"}\n```").unwrap(),
            json!({"city": "Oslo"})
        );
        assert!(check(&schema, "Paris!").unwrap_err().contains("not JSON"));
        let e = check(&schema, r#"{"city": 3}"#).unwrap_err();
        assert!(e.starts_with("/city: "), "{e}");
        let e = check(&schema, "{}").unwrap_err();
        assert!(e.contains("city"), "{e}");
    }
}
