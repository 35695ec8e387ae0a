//! Rendering the minijinja templates of channel files: strings render to
//! strings, and a JSON value renders each of its strings. A string that is
//! one expression and nothing else (`"{{ event }}"`) keeps the expression's
//! type, so a body can carry objects and numbers, not only text.

use std::sync::LazyLock;

use serde_json::Value;

use crate::error::{Error, Result};

static ENV: LazyLock<minijinja::Environment<'static>> = LazyLock::new(minijinja::Environment::new);

fn describe(e: &minijinja::Error) -> String {
    let mut msg = e.kind().to_string();
    if let Some(detail) = e.detail() {
        msg.push_str(": ");
        msg.push_str(detail);
    }
    msg
}

/// Renders one template over `ctx`.
pub fn render(field: &str, template: &str, ctx: &Value) -> Result<String> {
    ENV.render_str(template, ctx).map_err(|e| Error::Template {
        field: field.to_owned(),
        message: describe(&e),
    })
}

/// The expression of a string that is exactly `{{ expr }}`.
fn sole_expression(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%"))
        .then_some(inner.trim())
}

/// Renders every string of `value` over `ctx`.
pub fn render_value(field: &str, value: &Value, ctx: &Value) -> Result<Value> {
    Ok(match value {
        Value::String(s) => match sole_expression(s) {
            Some(expr) => {
                let compiled = ENV.compile_expression(expr).map_err(|e| Error::Template {
                    field: field.to_owned(),
                    message: describe(&e),
                })?;
                let out = compiled.eval(ctx).map_err(|e| Error::Template {
                    field: field.to_owned(),
                    message: describe(&e),
                })?;
                if out.is_undefined() {
                    Value::Null
                } else {
                    serde_json::to_value(&out).unwrap_or(Value::Null)
                }
            }
            None => Value::String(render(field, s, ctx)?),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| render_value(field, v, ctx))
                .collect::<Result<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), render_value(&format!("{field}.{k}"), v, ctx)?)))
                .collect::<Result<_>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_render_and_sole_expressions_keep_their_type() {
        let ctx = json!({"body": {"n": 3, "o": {"a": [1]}}, "params": {"team": "x"}});
        let v = render_value(
            "b",
            &json!({"t": "team {{ params.team }}", "n": "{{ body.n }}", "o": "{{ body.o }}", "k": 1, "missing": "{{ body.nope }}"}),
            &ctx,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"t": "team x", "n": 3, "o": {"a": [1]}, "k": 1, "missing": null})
        );
        assert!(render("m", "{{ 1 + }}", &ctx).is_err());
    }
}
