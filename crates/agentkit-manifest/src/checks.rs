//! Value checks shared by every file kind: JSON Schemas, cron, durations,
//! templates, regexes and `${VAR}` references.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::model::EnvRef;
use crate::source::SourceText;
use crate::vars::Fallback;

/// Every violation of `schema` (draft 2020-12) by `input`, as (JSON
/// pointer, message) pairs; `Err` when the schema itself does not compile.
/// Model tool calls, deterministic calls and channel routes all validate
/// with this one function (it lives here, the lowest crate with a
/// validator, so channels need not depend on the harness).
pub fn schema_errors(schema: &Value, input: &Value) -> Result<Vec<(String, String)>, String> {
    let validator = validator_options()
        .build(schema)
        .map_err(|e| e.to_string())?;
    Ok(validator
        .iter_errors(input)
        .map(|e| (e.instance_path().to_string(), e.to_string()))
        .collect())
}

/// An `output_schema` written in a file (`agent.toml`, a schedule, a
/// channel route, an eval case): a table that is a JSON Schema which
/// compiles. `None` (with a diagnostic at `key`) otherwise.
pub(crate) fn output_schema(
    ctx: &mut crate::source::Ctx,
    src: &SourceText,
    key: &str,
    schema: &impl serde::Serialize,
) -> Option<Value> {
    use crate::diagnostic::{Code, Diagnostic};
    let bad = |ctx: &mut crate::source::Ctx, message: String| {
        ctx.push(
            Diagnostic::error(Code::InvalidSchema, src.rel.clone(), message)
                .at(src.key_pos(key))
                .with_hint(format!("`{key}` is a JSON Schema (draft 2020-12) written as a table, e.g. type = \"object\" and [{key}.properties]")),
        );
    };
    match serde_json::to_value(schema) {
        Ok(value @ Value::Object(_)) => match schema_errors(&value, &Value::Null) {
            Ok(_) => Some(value),
            Err(e) => {
                bad(ctx, format!("`{key}` is not a valid JSON Schema: {e}"));
                None
            }
        },
        _ => {
            bad(
                ctx,
                format!("`{key}` must be a table (a JSON Schema object)"),
            );
            None
        }
    }
}

/// How every input schema is compiled: draft 2020-12, no remote `$ref`s
/// (jsonschema is built without its HTTP resolver), and `format` asserted
/// (`email`, `uri`, `date-time`, `uuid`, `ipv4`, …), as the TypeScript
/// framework's validators did; draft 2020-12 alone would only annotate it,
/// and a ported schema would silently accept what it used to refuse.
/// Unknown formats are ignored, as the specification says.
fn validator_options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
}

/// A JSON Schema compiled once, for inputs validated on every request
/// (channel routes): [`schema_errors`] without the compile per call.
#[derive(Debug, Clone)]
pub struct CompiledSchema(std::sync::Arc<jsonschema::Validator>);

impl CompiledSchema {
    /// Compiles `schema` (draft 2020-12, no remote `$ref`s).
    pub fn compile(schema: &Value) -> Result<CompiledSchema, String> {
        validator_options()
            .build(schema)
            .map(|v| CompiledSchema(std::sync::Arc::new(v)))
            .map_err(|e| e.to_string())
    }

    /// Every violation by `input`, as (JSON pointer, message) pairs.
    pub fn errors(&self, input: &Value) -> Vec<(String, String)> {
        self.0
            .iter_errors(input)
            .map(|e| (e.instance_path().to_string(), e.to_string()))
            .collect()
    }
}

/// Checks a JSON Schema against the draft 2020-12 meta-schema and compiles
/// it. Remote `$ref`s are never fetched (jsonschema is built without its
/// HTTP resolver), so a user-written schema cannot make the host reach the
/// network.
pub fn check_json_schema(schema: &Value) -> Result<(), String> {
    let build = |schema: &Value| {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(schema)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    // `build` first validates the schema against the 2020-12 meta-schema,
    // which is what `meta::validate` does when no `$schema` keyword picks
    // another draft or marks an embedded resource. Without one, the
    // separate meta-schema pass only matters for the wording of an error,
    // so it runs after a failed build instead of before every build (it
    // was a tenth of the time of discovering a project of many tools).
    if !mentions_schema_keyword(schema) {
        return build(schema).map_err(|e| meta_schema_error(schema).unwrap_or(e));
    }
    if let Some(e) = meta_schema_error(schema) {
        return Err(e);
    }
    build(schema)
}

/// Why `schema` fails its meta-schema, with the path of the bad part.
fn meta_schema_error(schema: &Value) -> Option<String> {
    let e = jsonschema::meta::validate(schema).err()?;
    let at = e.instance_path().to_string();
    Some(if at.is_empty() {
        e.to_string()
    } else {
        format!("{e} at `{at}`")
    })
}

/// Does a `$schema` key appear anywhere in `value`?
fn mentions_schema_keyword(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.contains_key("$schema") || map.values().any(mentions_schema_keyword)
        }
        Value::Array(items) => items.iter().any(mentions_schema_keyword),
        _ => false,
    }
}

/// A tool input schema must describe an object: models call tools with a
/// JSON object of arguments.
pub(crate) fn check_object_schema(schema: &Value) -> Result<(), String> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(()),
        None if schema.get("properties").is_some() => Ok(()),
        Some(other) => Err(format!(
            "`type` is {other}; a tool input schema must have `type = \"object\"`"
        )),
        None => Err("a tool input schema must have `type = \"object\"`".to_owned()),
    }
}

/// A parsed 5-field cron expression, evaluated in UTC.
#[derive(Debug, Clone)]
pub struct CronSchedule(croner::Cron);

impl CronSchedule {
    /// Parses standard 5-field cron (minute hour day-of-month month
    /// day-of-week; ranges, steps, lists, month and weekday names, 0 and 7
    /// for Sunday). When both day fields are restricted, a day matching
    /// either fires, as in classic cron.
    pub fn parse(expr: &str) -> Result<Self, String> {
        let expr = expr.trim();
        let fields = expr.split_whitespace().count();
        if fields != 5 {
            return Err(format!(
                "`{expr}` has {fields} field{}; cron here is 5 fields: minute hour day-of-month month day-of-week",
                if fields == 1 { "" } else { "s" }
            ));
        }
        check_standard_syntax(expr)?;
        check_cron_ranges(expr)?;
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .build()
            .parse(expr)
            .map(CronSchedule)
            .map_err(|e| format!("`{expr}` is not a valid cron expression: {e}"))?;
        // A fixed instant keeps the check deterministic; any date that can
        // ever match comes round within the calendar's 28-year cycle.
        let epoch = DateTime::<Utc>::from_timestamp(946_684_800, 0).unwrap_or_default();
        if cron.next_after(epoch).is_none() {
            return Err(format!("`{expr}` never fires (no such date)"));
        }
        Ok(cron)
    }

    /// The first fire time strictly after `after`: always a whole minute,
    /// whatever fraction of a second `after` carries, so every host that
    /// asks in the same minute gets the same instant (the key a shared
    /// database claims a tick by).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Whole seconds in: croner keeps `after`'s sub-seconds in what it
        // returns. A tick is strictly after `after` still, since the
        // truncation only moves `after` back within its own second, and
        // no fire time lies inside a second but at its start.
        let whole = after.timestamp();
        let after = DateTime::<Utc>::from_timestamp(whole, 0)?;
        let next = self.0.find_next_occurrence(&after, false).ok()?;
        // Whole minutes out (the expression has no seconds field).
        DateTime::<Utc>::from_timestamp(next.timestamp() - next.timestamp().rem_euclid(60), 0)
    }
}

/// Rejects the extensions some cron dialects add (`L`, `W`, `#`, `?`) and
/// anything but digits, names, `*`, `,`, `-` and `/`.
fn check_standard_syntax(expr: &str) -> Result<(), String> {
    const NAMES: [&str; 19] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", "sun",
        "mon", "tue", "wed", "thu", "fri", "sat",
    ];
    for field in expr.split_whitespace() {
        let mut rest = field.to_ascii_lowercase();
        for name in NAMES {
            rest = rest.replace(name, "0");
        }
        if let Some(c) = rest
            .chars()
            .find(|c| !(c.is_ascii_digit() || matches!(c, '*' | ',' | '-' | '/')))
        {
            return Err(format!(
                "`{expr}`: `{c}` in `{field}` is not standard 5-field cron"
            ));
        }
    }
    Ok(())
}

/// Checks the numbers of each field against its range, so the message can
/// name the field (the parser's own errors do not).
fn check_cron_ranges(expr: &str) -> Result<(), String> {
    const FIELDS: [(&str, u32, u32); 5] = [
        ("minute", 0, 59),
        ("hour", 0, 23),
        ("day-of-month", 1, 31),
        ("month", 1, 12),
        ("day-of-week", 0, 7),
    ];
    for (field, (name, lo, hi)) in expr.split_whitespace().zip(FIELDS) {
        for part in field.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => (r, Some(s)),
                None => (part, None),
            };
            if let Some(step) = step
                && step.parse::<u32>().map_or(true, |n| n == 0)
            {
                return Err(format!(
                    "`{expr}`: {name} step `/{step}` must be a positive number"
                ));
            }
            for n in range.split('-') {
                if let Ok(n) = n.parse::<u32>()
                    && !(lo..=hi).contains(&n)
                {
                    return Err(format!(
                        "`{expr}`: {name} value {n} is out of range {lo}–{hi}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Parses a duration such as `30s`, `10m`, `1h30m` or `500ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("`{s}` is not a duration ({e}); write e.g. `30s`, `10m` or `2h`"))?;
    if d.is_zero() {
        return Err(format!("`{s}` is zero; a duration must be positive"));
    }
    Ok(d)
}

/// Compiles a minijinja template, reporting its syntax error.
pub fn check_template(source: &str) -> Result<(), String> {
    let env = minijinja::Environment::new();
    env.template_from_str(source).map(|_| ()).map_err(|e| {
        let mut msg = e.kind().to_string();
        if let Some(detail) = e.detail() {
            msg.push_str(": ");
            msg.push_str(detail);
        }
        if let Some(line) = e.line() {
            msg.push_str(&format!(" (template line {line})"));
        }
        msg
    })
}

/// Checks every string inside a JSON value as a template.
pub(crate) fn check_templates_in(value: &Value) -> Result<(), String> {
    match value {
        Value::String(s) => check_template(s),
        Value::Array(items) => items.iter().try_for_each(check_templates_in),
        Value::Object(map) => map.values().try_for_each(check_templates_in),
        _ => Ok(()),
    }
}

/// Compiles a regular expression.
pub(crate) fn check_regex(source: &str) -> Result<(), String> {
    regex::Regex::new(source).map(|_| ()).map_err(|e| {
        e.to_string()
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned()
    })
}

/// Finds every `${NAME}` (with `:-default` or `:?message`) in a TOML
/// file, outside comments, with its line.
pub(crate) fn scan_env_refs(src: &SourceText) -> Vec<EnvRef> {
    if !src.text.contains("${") {
        return Vec::new(); // most files: one fast search instead of a scan
    }
    crate::vars::toml_references(&src.text)
        .into_iter()
        .map(|(line, r)| {
            let (default, required) = match r.fallback {
                Fallback::Empty => (None, None),
                Fallback::Default(d) => (Some(d.to_owned()), None),
                Fallback::Required(m) => (None, Some(m.trim().to_owned())),
            };
            EnvRef {
                kind: r.kind,
                name: r.name.to_owned(),
                path: src.rel.clone(),
                line,
                default,
                required,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    #[test]
    fn schemas() {
        assert!(
            check_json_schema(&json!({"type": "object", "properties": {"a": {"type": "string"}}}))
                .is_ok()
        );
        assert!(check_json_schema(&json!({"type": "objekt"})).is_err());
        assert!(check_json_schema(&json!({"type": "object", "required": "a"})).is_err());
        assert!(check_object_schema(&json!({"type": "string"})).is_err());
        assert!(check_object_schema(&json!({"type": "object"})).is_ok());
    }

    #[test]
    fn schema_errors_name_the_bad_part() {
        // Without `$schema` the meta-schema pass only runs after a failed
        // build; the error must still be the meta-schema one, with its path.
        let err = check_json_schema(&json!({"type": "object", "required": "a"}));
        assert!(err.is_err_and(|e| e.ends_with(" at `/required`")));
        let err = check_json_schema(&json!({"properties": {"a": {"type": 3}}}));
        assert!(err.is_err_and(|e| e.ends_with(" at `/properties/a/type`")));
        // With `$schema`, the declared draft's meta-schema applies first.
        let draft7 =
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
        assert!(check_json_schema(&draft7).is_ok());
        let nested = json!({"properties": {"a": {"$schema": 1}}});
        assert!(mentions_schema_keyword(&nested));
        assert!(!mentions_schema_keyword(&json!({"type": "object"})));
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let schema = json!({"$ref": "http://127.0.0.1:9/schema.json"});
        assert!(check_json_schema(&schema).is_err());
    }

    #[test]
    fn cron_fields_and_next_fire() {
        assert!(CronSchedule::parse("0 9 * * 1-5").is_ok());
        assert!(CronSchedule::parse("*/15 * * jan,feb mon-fri").is_ok());
        assert!(CronSchedule::parse("0 0 * * 7").is_ok());
        assert!(CronSchedule::parse("* * * *").is_err());
        assert!(CronSchedule::parse("0 * * * * *").is_err());
        assert_eq!(
            CronSchedule::parse("61 * * * *").err().as_deref(),
            Some("`61 * * * *`: minute value 61 is out of range 0–59")
        );
        assert!(CronSchedule::parse("*/0 * * * *").is_err());
        assert!(CronSchedule::parse("0 0 32 * *").is_err());
        assert!(CronSchedule::parse("0 0 L * *").is_err());
        assert!(CronSchedule::parse("0 0 * * 5#3").is_err());
        assert!(
            CronSchedule::parse("0 0 31 2 *")
                .err()
                .is_some_and(|e| e.contains("never fires"))
        );
        assert!(CronSchedule::parse("0 0 * JUL WED").is_ok());
        let at = Utc
            .with_ymd_and_hms(2026, 11, 27, 10, 0, 0)
            .single()
            .unwrap_or_default(); // a Friday
        let next = CronSchedule::parse("0 9 * * 1-5")
            .ok()
            .and_then(|c| c.next_after(at));
        assert_eq!(next, Utc.with_ymd_and_hms(2026, 11, 30, 9, 0, 0).single());
        // Day-of-month OR day-of-week, as in classic cron.
        let next = CronSchedule::parse("0 0 13 * 5")
            .ok()
            .and_then(|c| c.next_after(at));
        assert_eq!(next, Utc.with_ymd_and_hms(2026, 12, 4, 0, 0, 0).single());
    }

    #[test]
    fn the_next_fire_is_a_whole_minute_whatever_the_sub_seconds_asked_from() {
        // Hosts that ask at different fractions of a second must all get
        // the same instant: it is the key a shared database claims by.
        let cron = CronSchedule::parse("* * * * *").unwrap_or_else(|e| panic!("{e}"));
        let base = Utc
            .with_ymd_and_hms(2026, 12, 3, 12, 0, 30)
            .single()
            .unwrap_or_default();
        let want = Utc.with_ymd_and_hms(2026, 12, 3, 12, 1, 0).single();
        for ms in [0, 1, 352, 355, 365, 999] {
            let after = base + chrono::Duration::milliseconds(ms);
            assert_eq!(cron.next_after(after), want, "asked at +{ms} ms");
        }
        // From a tick (or within its own second), the next minute.
        let tick = want.unwrap_or_default();
        let later = Utc.with_ymd_and_hms(2026, 12, 3, 12, 2, 0).single();
        for ms in [0, 1, 355, 999] {
            let after = tick + chrono::Duration::milliseconds(ms);
            assert_eq!(cron.next_after(after), later, "asked at the tick +{ms} ms");
        }
        // The last moment before a tick still gets that tick.
        let just_before = tick - chrono::Duration::milliseconds(1);
        assert_eq!(cron.next_after(just_before), want);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0s").is_err());
    }

    #[test]
    fn templates_and_regexes() {
        assert!(check_template("Hello {{ body.name }}").is_ok());
        assert!(check_template("Hello {{ body.name ").is_err());
        assert!(check_regex("recorded|added").is_ok());
        assert!(check_regex("(unclosed").is_err());
    }

    #[test]
    fn env_refs_with_lines() {
        let src = SourceText::new(
            "x".into(),
            "a = \"${A}\"\nb = \"${B_2}-${}\" # ${bad-name} ${IN_COMMENT}\nc = \"${C:-d} ${D:?why}\"\n"
                .into(),
        );
        let refs: Vec<_> = scan_env_refs(&src)
            .into_iter()
            .map(|r| (r.name, r.line, r.default, r.required))
            .collect();
        assert_eq!(
            refs,
            vec![
                ("A".to_owned(), 1, None, None),
                ("B_2".to_owned(), 2, None, None),
                ("C".to_owned(), 3, Some("d".to_owned()), None),
                ("D".to_owned(), 3, None, Some("why".to_owned())),
            ]
        );
    }
}
