//! JSON values as TOML files: `null`s dropped (TOML has none), with a
//! comment saying where the file came from.

use serde_json::Value;

/// `value` (an object) as a TOML document headed by `comment`; `None`
/// when it is not an object.
pub(crate) fn document(comment: &str, value: &Value) -> Option<String> {
    let toml::Value::Table(table) = to_toml(value)? else {
        return None;
    };
    let body = toml::to_string_pretty(&table).ok()?;
    let mut out = String::new();
    for line in comment.lines() {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&body);
    Some(out)
}

/// `value` in TOML; `None` for `null` (members that are `null` are left
/// out, array items that are `null` too).
pub(crate) fn to_toml(value: &Value) -> Option<toml::Value> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(items.iter().filter_map(to_toml).collect()),
        Value::Object(map) => {
            let mut table = toml::Table::new();
            for (k, v) in map {
                if let Some(v) = to_toml(v) {
                    table.insert(k.clone(), v);
                }
            }
            toml::Value::Table(table)
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use expect_test::expect;

    #[test]
    fn nested_tables_and_nulls() {
        let value = serde_json::json!({
            "description": "d",
            "harness": {"max_steps": 4},
            "model": null,
            "tags": ["a", null, "b"],
            "routes": [{"method": "POST", "send": {"message": "m"}}],
        });
        expect![[r#"
            # from x
            description = "d"
            tags = [
                "a",
                "b",
            ]

            [harness]
            max_steps = 4

            [[routes]]
            method = "POST"

            [routes.send]
            message = "m"
        "#]]
        .assert_eq(&document("from x", &value).expect("a TOML document"));
    }
}
