//! `channels/<id>.toml`: declarative webhook routes, the built-in HTTP
//! channel's overrides, and the settings of prebuilt packs.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::checks;
use crate::command::{RawCommand, read_command};
use crate::diagnostic::{Code, Diagnostic, Position};
use crate::events::check_event_name;
use crate::model::{
    AuthPolicy, BearerToken, CallToolAction, Channel, ChannelKind, Delivery, Method, Route,
    RouteAction, RouteHandler, RouteResponse, SendAction,
};
use crate::names;
use crate::source::{Ctx, SourceText};
use crate::tools::toml_to_json;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhook {
    #[allow(dead_code)]
    kind: Option<String>,
    #[allow(dead_code)]
    description: Option<String>,
    /// Parsed from the table by `parse_auth`, which knows the channel kind.
    #[allow(dead_code)]
    auth: Option<toml::Value>,
    /// Read by `read_max_body`, for every kind.
    #[allow(dead_code)]
    max_body: Option<toml::Value>,
    state: Option<toml::Value>,
    #[serde(default)]
    routes: Vec<RawRoute>,
    #[serde(default)]
    events: BTreeMap<String, Delivery>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    method: String,
    path: String,
    description: Option<String>,
    body_schema: Option<toml::Value>,
    query_schema: Option<toml::Value>,
    send: Option<SendAction>,
    call_tool: Option<CallToolAction>,
    handler: Option<RawHandler>,
    response: Option<RawResponse>,
}

/// `[routes.handler]`: a command table plus the headers it is handed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHandler {
    command: Option<Vec<String>>,
    timeout: Option<String>,
    max_output_bytes: Option<u64>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    headers: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResponse {
    status: Option<toml::Value>,
    body: Option<toml::Value>,
}

/// The policies a chain may name as bare strings.
const SIMPLE_POLICIES: &[&str] = &[
    "local_dev_strict",
    "local_dev",
    "loopback_only",
    "allow_all",
    "public_endpoint",
];
const TABLE_POLICIES: &[&str] = &["bearer", "shared_secret", "hmac_signature", "jwt"];

/// The `alg`s a `jwt` policy may accept: asymmetric ones only.
const JWT_ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// The fields of `{ jwt = { … } }`.
const JWT_FIELDS: &[&str] = &[
    "jwks_url",
    "issuer",
    "audience",
    "algorithms",
    "clock_skew_seconds",
    "principal_claim",
    "principal_prefix",
    "claims",
    "cache_seconds",
    "refetch_floor_seconds",
];

/// `{ jwt = { jwks_url, issuer, audience, … } }`, or what is wrong with
/// it (message, hint).
fn parse_jwt(settings: &toml::Table) -> Result<AuthPolicy, (String, Option<String>)> {
    if let Some(k) = settings.keys().find(|k| !JWT_FIELDS.contains(&k.as_str())) {
        let hint = names::did_you_mean(k, JWT_FIELDS.iter().copied())
            .map(|s| format!("did you mean `{s}`?"))
            .unwrap_or_else(|| format!("fields: {}", JWT_FIELDS.join(", ")));
        return Err((format!("unknown field `{k}` in `jwt`"), Some(hint)));
    }
    let text = |k: &str| -> Result<Option<String>, (String, Option<String>)> {
        match settings.get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err((format!("`jwt.{k}` must be a string"), None)),
        }
    };
    let strings = |k: &str| -> Result<Option<Vec<String>>, (String, Option<String>)> {
        match settings.get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(vec![s.clone()])),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| {
                    (
                        format!("`jwt.{k}` must be a string or an array of strings"),
                        None,
                    )
                }),
            Some(_) => Err((
                format!("`jwt.{k}` must be a string or an array of strings"),
                None,
            )),
        }
    };
    let seconds = |k: &str, default: u64| -> Result<u64, (String, Option<String>)> {
        match settings.get(k) {
            None => Ok(default),
            Some(toml::Value::Integer(n)) => {
                u64::try_from(*n).map_err(|_| (format!("`jwt.{k}` must not be negative"), None))
            }
            Some(_) => Err((format!("`jwt.{k}` must be a whole number of seconds"), None)),
        }
    };
    let required = "`jwt` needs `jwks_url`, `issuer` and `audience`".to_owned();
    let example = Some(
        "e.g. { jwt = { jwks_url = \"https://idp.example/.well-known/jwks.json\", issuer = \"https://idp.example/\", audience = \"my-agent\" } }".to_owned(),
    );
    let (Some(jwks_url), Some(issuer), Some(audience)) =
        (text("jwks_url")?, text("issuer")?, strings("audience")?)
    else {
        return Err((required, example));
    };
    if jwks_url.is_empty()
        || issuer.is_empty()
        || audience.is_empty()
        || audience.iter().any(String::is_empty)
    {
        return Err((required, example));
    }
    if !(jwks_url.starts_with("https://")
        || jwks_url.starts_with("http://")
        || jwks_url.starts_with("${"))
    {
        return Err((
            format!("`jwt.jwks_url` must be an http(s) URL, not `{jwks_url}`"),
            None,
        ));
    }
    let algorithms = strings("algorithms")?
        .unwrap_or_else(|| ["RS256", "ES256", "EdDSA"].map(str::to_owned).to_vec());
    if algorithms.is_empty() {
        return Err((
            "`jwt.algorithms` is empty, so no token verifies".into(),
            None,
        ));
    }
    for alg in &algorithms {
        if !JWT_ALGORITHMS.contains(&alg.as_str()) {
            let hint = if alg.eq_ignore_ascii_case("none")
                || alg.to_ascii_uppercase().starts_with("HS")
            {
                "a JWKS publishes public keys: `none` and HMAC (HS*) are never accepted".to_owned()
            } else {
                format!("one of {}", JWT_ALGORITHMS.join(", "))
            };
            return Err((format!("`jwt` cannot accept algorithm `{alg}`"), Some(hint)));
        }
    }
    let mut claims = std::collections::BTreeMap::new();
    match settings.get("claims") {
        None => {}
        Some(toml::Value::Table(t)) => {
            for (attribute, claim) in t {
                let Some(claim) = claim.as_str() else {
                    return Err((
                        format!("`jwt.claims.{attribute}` must name a claim (a string)"),
                        None,
                    ));
                };
                claims.insert(attribute.clone(), claim.to_owned());
            }
        }
        Some(_) => {
            return Err((
                "`jwt.claims` must be a table of attribute = \"claim\"".into(),
                Some("e.g. claims = { email = \"email\", groups = \"groups\" }".into()),
            ));
        }
    }
    Ok(AuthPolicy::Jwt {
        jwks_url,
        issuer,
        audience,
        algorithms,
        clock_skew_seconds: seconds("clock_skew_seconds", 60)?,
        principal_claim: text("principal_claim")?.unwrap_or_else(|| "sub".to_owned()),
        principal_prefix: text("principal_prefix")?.unwrap_or_else(|| "jwt:".to_owned()),
        claims,
        cache_seconds: seconds("cache_seconds", 600)?,
        refetch_floor_seconds: seconds("refetch_floor_seconds", 30)?,
    })
}

pub(crate) fn read_channel(ctx: &mut Ctx, path: &Path, id: &str) -> Option<Channel> {
    let src = ctx.read_text(path)?;
    let table: toml::Table = ctx.parse_toml(&src)?;
    let kind = match table.get("kind") {
        None => ChannelKind::Webhook,
        Some(toml::Value::String(k)) => {
            match serde_json::from_value::<ChannelKind>(Value::String(k.clone())) {
                Ok(kind) => kind,
                Err(_) => {
                    let known = ["webhook", "http", "github", "gitlab", "bitbucket", "slack"];
                    let hint = names::did_you_mean(k, known)
                        .map(|s| format!("did you mean `{s}`?"))
                        .unwrap_or_else(|| format!("kinds: {}", known.join(", ")));
                    ctx.push(
                        Diagnostic::error(
                            Code::InvalidValue,
                            src.rel.clone(),
                            format!("unknown channel kind `{k}`"),
                        )
                        .at(src.key_pos("kind"))
                        .with_hint(hint),
                    );
                    return None;
                }
            }
        }
        Some(_) => {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    "`kind` must be a string",
                )
                .at(src.key_pos("kind")),
            );
            return None;
        }
    };
    if kind == ChannelKind::Http && id != "http" {
        ctx.push(
            Diagnostic::error(Code::InvalidValue, src.rel.clone(), "`kind = \"http\"` configures the built-in HTTP channel and must be in `channels/http.toml`")
                .at(src.key_pos("kind")),
        );
        return None;
    }
    let auth = match table.get("auth") {
        Some(v) => Some(parse_auth(ctx, &src, v, kind)?),
        None => None,
    };
    let max_body = match table.get("max_body") {
        Some(_) if kind == ChannelKind::Http => None,
        Some(v) => Some(read_max_body(ctx, &src, v)?),
        None => None,
    };
    let mut channel = read_kind(ctx, path, &src, &table, id, kind, auth)?;
    channel.max_body = max_body;
    Some(channel)
}

/// The largest body a channel may set: beyond it a request would hold too
/// much memory for one delivery.
const MAX_BODY_CEILING: u64 = 1024 * 1024 * 1024;

/// `max_body = "25MiB"` (or a number of bytes), within 1 byte to 1 GiB.
fn read_max_body(ctx: &mut Ctx, src: &SourceText, v: &toml::Value) -> Option<u64> {
    let parsed = match v {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("`{n}` is negative")),
        toml::Value::String(s) => parse_size(s),
        other => Err(format!("`{other}` is not a size")),
    };
    let checked = parsed.and_then(|n| match n {
        0 => Err("a limit of 0 bytes refuses every request".to_owned()),
        n if n > MAX_BODY_CEILING => Err(format!("{n} bytes is over the 1 GiB ceiling")),
        n => Ok(n),
    });
    match checked {
        Ok(n) => Some(n),
        Err(message) => {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("`max_body`: {message}"),
                )
                .at(src.key_pos("max_body"))
                .with_hint(
                    "a size such as \"25MiB\", \"512KiB\" or \"10MB\", or a number of bytes",
                ),
            );
            None
        }
    }
}

/// `25MiB`, `512 KiB`, `10MB`, `1048576`: a number and an optional unit
/// (B, KB, KiB, MB, MiB, GB, GiB; case-insensitive).
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("`{s}` is not a size"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "kib" => 1 << 10,
        "mb" => 1000 * 1000,
        "mib" => 1 << 20,
        "gb" => 1000 * 1000 * 1000,
        "gib" => 1 << 30,
        other => return Err(format!("`{s}`: unknown unit `{other}`")),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// The rest of a channel file, by its kind.
fn read_kind(
    ctx: &mut Ctx,
    path: &Path,
    src: &SourceText,
    table: &toml::Table,
    id: &str,
    kind: ChannelKind,
    auth: Option<Vec<AuthPolicy>>,
) -> Option<Channel> {
    match kind {
        ChannelKind::Webhook => {
            // `agent/channels/<id>.toml`: handlers run in `agent/`.
            let agent_dir = path
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("."));
            read_webhook(ctx, src, id, auth, agent_dir)
        }
        ChannelKind::Http => {
            if let Some(key) = table
                .keys()
                .find(|k| !["kind", "auth", "description"].contains(&k.as_str()))
            {
                ctx.push(
                    Diagnostic::error(
                        Code::UnknownField,
                        src.rel.clone(),
                        format!("unknown field `{key}` for the built-in HTTP channel"),
                    )
                    .at(src.key_pos(key))
                    .with_hint("`channels/http.toml` sets only `auth`"),
                );
                return None;
            }
            Some(Channel {
                id: id.to_owned(),
                path: src.rel.clone(),
                kind,
                auth,
                routes: Vec::new(),
                events: BTreeMap::new(),
                max_body: None,
                state: None,
                settings: None,
            })
        }
        _ => {
            let mut settings = table.clone();
            settings.remove("kind");
            settings.remove("auth");
            settings.remove("max_body");
            Some(Channel {
                id: id.to_owned(),
                path: src.rel.clone(),
                kind,
                auth,
                routes: Vec::new(),
                events: BTreeMap::new(),
                max_body: None,
                state: None,
                settings: Some(toml_to_json(&toml::Value::Table(settings))),
            })
        }
    }
}

fn read_webhook(
    ctx: &mut Ctx,
    src: &SourceText,
    id: &str,
    auth: Option<Vec<AuthPolicy>>,
    agent_dir: &Path,
) -> Option<Channel> {
    let raw: RawWebhook = ctx.parse_toml(src)?;
    let mut ok = true;
    if raw.routes.is_empty() && raw.events.is_empty() {
        ctx.push(
            Diagnostic::warning(Code::MissingField, src.rel.clone(), format!("channel `{id}` has no `[[routes]]` and no `[events]`; it does nothing"))
                .with_hint("add a [[routes]] table with `method`, `path` and a `[routes.send]` or `[routes.call_tool]`"),
        );
    }
    let mut routes: Vec<Route> = Vec::new();
    for (i, r) in raw.routes.into_iter().enumerate() {
        let pos = nth_table_pos(src, "[[routes]]", i);
        match read_route(ctx, src, pos, r, agent_dir) {
            Some(route) => {
                if routes
                    .iter()
                    .any(|p| p.method == route.method && same_shape(&p.path, &route.path))
                {
                    ctx.push(
                        Diagnostic::error(
                            Code::InvalidRoute,
                            src.rel.clone(),
                            format!(
                                "route {} {} is declared twice",
                                route.method.as_str(),
                                route.path
                            ),
                        )
                        .at(pos),
                    );
                    ok = false;
                } else {
                    routes.push(route);
                }
            }
            None => ok = false,
        }
    }
    for (event, delivery) in &raw.events {
        if let Err(d) = check_event_name(src, &format!("[events.\"{event}\"]"), event) {
            ctx.push(d);
            ok = false;
        }
        if let Some(body) = &delivery.body
            && let Err(e) = checks::check_templates_in(body)
        {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidTemplate,
                    src.rel.clone(),
                    format!("`events.\"{event}\".body`: {e}"),
                )
                .at(src.text.find(event.as_str()).map(|o| src.position(o))),
            );
            ok = false;
        }
        if let Some(state) = &delivery.state {
            let problem = if state.is_object() {
                checks::check_templates_in(state).err()
            } else {
                Some("must be a table of keys to merge into the state".to_owned())
            };
            if let Some(e) = problem {
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidTemplate,
                        src.rel.clone(),
                        format!("`events.\"{event}\".state`: {e}"),
                    )
                    .at(src.text.find(event.as_str()).map(|o| src.position(o))),
                );
                ok = false;
            }
        }
        if delivery.signature_secret.is_some() != delivery.signature_header.is_some() {
            ctx.push(
                Diagnostic::error(Code::MissingField, src.rel.clone(), format!("`events.\"{event}\"`: `signature_secret` and `signature_header` go together"))
                    .at(src.text.find(event.as_str()).map(|o| src.position(o))),
            );
            ok = false;
        }
    }
    let state = raw.state.as_ref().map(toml_to_json);
    ok.then(|| Channel {
        id: id.to_owned(),
        path: src.rel.clone(),
        kind: ChannelKind::Webhook,
        auth,
        routes,
        events: raw.events,
        max_body: None,
        state,
        settings: None,
    })
}

/// Do two route paths match the same requests (`:a` and `:b` are the same
/// shape)?
fn same_shape(a: &str, b: &str) -> bool {
    fn norm(p: &str) -> Vec<&str> {
        p.split('/')
            .map(|s| if s.starts_with(':') { ":" } else { s })
            .collect()
    }
    norm(a) == norm(b)
}

/// The position of the `n`th `[[table]]` header.
fn nth_table_pos(src: &SourceText, header: &str, n: usize) -> Option<Position> {
    let mut offset = 0;
    let mut seen = 0;
    for line in src.text.split_inclusive('\n') {
        if line.trim() == header {
            if seen == n {
                return Some(src.position(offset));
            }
            seen += 1;
        }
        offset += line.len();
    }
    None
}

fn read_route(
    ctx: &mut Ctx,
    src: &SourceText,
    pos: Option<Position>,
    r: RawRoute,
    agent_dir: &Path,
) -> Option<Route> {
    let err = |ctx: &mut Ctx, code: Code, msg: String, hint: Option<&str>| {
        ctx.push(
            Diagnostic::error(code, src.rel.clone(), msg)
                .at(pos)
                .with_opt_hint(hint.map(str::to_owned)),
        );
        None
    };
    let method = match r.method.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "PATCH" => Method::Patch,
        "DELETE" => Method::Delete,
        _ => {
            return err(
                ctx,
                Code::InvalidRoute,
                format!("unknown method `{}`", r.method),
                Some("GET, POST, PUT, PATCH or DELETE"),
            );
        }
    };
    let route_name = format!("{} {}", method.as_str(), r.path);
    if !r.path.starts_with('/') {
        return err(
            ctx,
            Code::InvalidRoute,
            format!("route path `{}` must begin with `/`", r.path),
            None,
        );
    }
    let mut params = Vec::new();
    for seg in r.path.split('/').skip(1) {
        if seg.is_empty() && r.path != "/" {
            return err(
                ctx,
                Code::InvalidRoute,
                format!("route path `{}` has an empty segment", r.path),
                None,
            );
        }
        if let Some(p) = seg.strip_prefix(':') {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return err(
                    ctx,
                    Code::InvalidRoute,
                    format!("route path `{}` has a bad parameter `{seg}`", r.path),
                    Some("parameters are `:name` with letters, digits and `_`"),
                );
            }
            if params.contains(&p) {
                return err(
                    ctx,
                    Code::InvalidRoute,
                    format!("route path `{}` repeats parameter `{p}`", r.path),
                    None,
                );
            }
            params.push(p);
        } else if seg
            .chars()
            .any(|c| c.is_whitespace() || "?#*{}".contains(c))
        {
            return err(
                ctx,
                Code::InvalidRoute,
                format!("route path `{}` has a bad segment `{seg}`", r.path),
                None,
            );
        }
    }
    let schema =
        |ctx: &mut Ctx, which: &str, v: Option<toml::Value>| -> Result<Option<Value>, ()> {
            let Some(v) = v else { return Ok(None) };
            let json = toml_to_json(&v);
            match checks::check_json_schema(&json) {
                Ok(()) => Ok(Some(json)),
                Err(e) => {
                    ctx.push(
                        Diagnostic::error(
                            Code::InvalidSchema,
                            src.rel.clone(),
                            format!("{route_name}: invalid `{which}`: {e}"),
                        )
                        .at(pos),
                    );
                    Err(())
                }
            }
        };
    let body_schema = schema(ctx, "body_schema", r.body_schema).ok()?;
    let query_schema = schema(ctx, "query_schema", r.query_schema).ok()?;
    match method {
        Method::Get if query_schema.is_none() => {
            return err(
                ctx,
                Code::RouteSchemaRequired,
                format!("{route_name} needs a `query_schema`"),
                Some(
                    "GET routes validate their query string; use `[routes.query_schema]` with `type = \"object\"` for an open surface",
                ),
            );
        }
        Method::Get if body_schema.is_some() => {
            return err(
                ctx,
                Code::ConflictingFields,
                format!("{route_name} has a `body_schema`, but GET requests have no body"),
                None,
            );
        }
        Method::Post | Method::Put | Method::Patch if body_schema.is_none() => {
            return err(
                ctx,
                Code::RouteSchemaRequired,
                format!("{route_name} needs a `body_schema`"),
                Some(
                    "POST, PUT and PATCH routes validate their body; use `[routes.body_schema]` with `type = \"object\"` for an open surface",
                ),
            );
        }
        _ => {}
    }
    if r.handler.is_some() && (r.send.is_some() || r.call_tool.is_some() || r.response.is_some()) {
        return err(
            ctx,
            Code::ConflictingFields,
            format!("{route_name} has a `handler` and also `send`, `call_tool` or `response`"),
            Some(
                "a handler answers the route itself (its stdout is the response); drop the other tables, or drop the handler",
            ),
        );
    }
    let send = match r.send {
        None => None,
        Some(send) => {
            let mut templates: Vec<(&str, &str)> = vec![("message", &send.message)];
            for (k, v) in [
                ("continuation", &send.continuation),
                ("title", &send.title),
                ("purpose", &send.purpose),
                ("as_of", &send.as_of),
            ] {
                if let Some(v) = v {
                    templates.push((k, v));
                }
            }
            for (k, v) in &send.workspace_files {
                if !is_safe_relative(k) {
                    return err(
                        ctx,
                        Code::InvalidValue,
                        format!(
                            "{route_name}: workspace file `{k}` must be a relative path inside the workspace"
                        ),
                        None,
                    );
                }
                templates.push(("workspace_files", v));
            }
            for (k, t) in templates {
                if let Err(e) = checks::check_template(t) {
                    return err(
                        ctx,
                        Code::InvalidTemplate,
                        format!("{route_name}: `send.{k}`: {e}"),
                        None,
                    );
                }
            }
            if let Some(schema) = &send.output_schema {
                match checks::schema_errors(schema, &serde_json::Value::Null) {
                    Ok(_) if schema.is_object() => {}
                    Ok(_) => {
                        return err(
                            ctx,
                            Code::InvalidSchema,
                            format!(
                                "{route_name}: `send.output_schema` must be a table (a JSON Schema object)"
                            ),
                            None,
                        );
                    }
                    Err(e) => {
                        return err(
                            ctx,
                            Code::InvalidSchema,
                            format!(
                                "{route_name}: `send.output_schema` is not a valid JSON Schema: {e}"
                            ),
                            Some(
                                "a JSON Schema (draft 2020-12) written as TOML, e.g. [routes.send.output_schema] with type = \"object\"",
                            ),
                        );
                    }
                }
            }
            Some(send)
        }
    };
    if let Some(call) = &r.call_tool
        && let Err(e) = checks::check_templates_in(&call.input)
    {
        return err(
            ctx,
            Code::InvalidTemplate,
            format!("{route_name}: `call_tool.input`: {e}"),
            None,
        );
    }
    let action = match (send, r.call_tool, r.handler) {
        (_, _, Some(h)) => {
            for name in &h.headers {
                if name.is_empty()
                    || !name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return err(
                        ctx,
                        Code::InvalidValue,
                        format!(
                            "{route_name}: `handler.headers` entry `{name}` is not a header name"
                        ),
                        None,
                    );
                }
            }
            let raw = RawCommand {
                command: h.command,
                timeout: h.timeout,
                max_output_bytes: h.max_output_bytes,
                env: h.env,
            };
            let command = read_command(
                ctx,
                src,
                pos,
                &format!("{route_name}: `handler`"),
                raw,
                agent_dir,
            )?;
            RouteAction::Handler(RouteHandler {
                command,
                headers: h.headers.iter().map(|n| n.to_ascii_lowercase()).collect(),
            })
        }
        (Some(send), Some(call_tool), None) => RouteAction::CallToolThenSend { call_tool, send },
        (Some(send), None, None) => RouteAction::Send(send),
        (None, Some(call), None) => RouteAction::CallTool(call),
        (None, None, None) if r.response.is_some() => RouteAction::Respond,
        (None, None, None) => {
            return err(
                ctx,
                Code::MissingField,
                format!("{route_name} does nothing"),
                Some(
                    "add `[routes.send]` (a message into a session), `[routes.call_tool]` (optionally followed by `[routes.send]`), `[routes.handler]` (a program answers), or `[routes.response]`",
                ),
            );
        }
    };
    let response = match r.response {
        None => None,
        Some(raw) => {
            let status = raw.status.as_ref().map(toml_to_json);
            match &status {
                None => {}
                Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (100..=599).contains(&n)) => {}
                Some(Value::String(t)) => {
                    if let Err(e) = checks::check_template(t) {
                        return err(
                            ctx,
                            Code::InvalidTemplate,
                            format!("{route_name}: `response.status`: {e}"),
                            None,
                        );
                    }
                }
                Some(other) => {
                    return err(
                        ctx,
                        Code::InvalidValue,
                        format!(
                            "{route_name}: `response.status` {other} is not an HTTP status (100-599) or a template"
                        ),
                        None,
                    );
                }
            }
            let body = raw.body.as_ref().map(toml_to_json);
            if let Some(body) = &body
                && let Err(e) = checks::check_templates_in(body)
            {
                return err(
                    ctx,
                    Code::InvalidTemplate,
                    format!("{route_name}: `response.body`: {e}"),
                    None,
                );
            }
            Some(RouteResponse { status, body })
        }
    };
    Some(Route {
        method,
        path: r.path,
        description: r.description,
        body_schema,
        query_schema,
        action,
        response,
    })
}

/// A relative path with no `..`, no root and no empty segments.
pub(crate) fn is_safe_relative(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\\')
        && p.split('/').all(|s| !s.is_empty() && s != ".." && s != ".")
}

fn parse_auth(
    ctx: &mut Ctx,
    src: &SourceText,
    v: &toml::Value,
    kind: ChannelKind,
) -> Option<Vec<AuthPolicy>> {
    let pos = src.key_pos("auth");
    let mut fail = |msg: String, hint: Option<String>| {
        ctx.push(
            Diagnostic::error(Code::InvalidAuth, src.rel.clone(), msg)
                .at(pos)
                .with_opt_hint(hint),
        );
        None
    };
    let toml::Value::Array(items) = v else {
        return fail(
            "`auth` must be an array of policies".into(),
            Some(
                "e.g. auth = [\"local_dev_strict\", { bearer = { token = \"${TOKEN}\" } }]".into(),
            ),
        );
    };
    if items.is_empty() {
        return fail(
            "`auth` is empty, so every request would get 401".into(),
            Some("name at least one policy, or remove `auth` for the default".into()),
        );
    }
    let mut out = Vec::new();
    for item in items {
        let policy = match item {
            toml::Value::String(s) => match s.as_str() {
                "local_dev_strict" => AuthPolicy::LocalDevStrict,
                "local_dev" => AuthPolicy::LocalDev,
                "loopback_only" => AuthPolicy::LoopbackOnly,
                "allow_all" => AuthPolicy::AllowAll,
                "public_endpoint" => AuthPolicy::PublicEndpoint,
                other if TABLE_POLICIES.contains(&other) => {
                    return fail(
                        format!("policy `{other}` needs settings"),
                        Some(format!("write {{ {other} = {{ … }} }}")),
                    );
                }
                other => {
                    let all = SIMPLE_POLICIES.iter().chain(TABLE_POLICIES).copied();
                    let hint =
                        names::did_you_mean(other, all).map(|s| format!("did you mean `{s}`?"));
                    return fail(format!("unknown auth policy `{other}`"), hint);
                }
            },
            toml::Value::Table(t) if t.len() == 1 => {
                let Some((name, settings)) = t.iter().next() else {
                    continue;
                };
                let toml::Value::Table(settings) = settings else {
                    return fail(format!("policy `{name}` settings must be a table"), None);
                };
                let get = |k: &str| settings.get(k).and_then(|v| v.as_str()).map(str::to_owned);
                let unknown = |allowed: &[&str]| {
                    settings
                        .keys()
                        .find(|k| !allowed.contains(&k.as_str()))
                        .cloned()
                };
                match name.as_str() {
                    "bearer" => {
                        if let Some(k) = unknown(&["token", "principal", "tokens"]) {
                            return fail(format!("unknown field `{k}` in `bearer`"), Some("`token` (+ `principal`), or `tokens = { principal = \"token\" }`".into()));
                        }
                        let mut tokens = Vec::new();
                        if let Some(token) = get("token") {
                            tokens.push(BearerToken {
                                token,
                                principal: get("principal").unwrap_or_else(|| "bearer".to_owned()),
                            });
                        }
                        if let Some(toml::Value::Table(map)) = settings.get("tokens") {
                            for (principal, token) in map {
                                let Some(token) = token.as_str() else {
                                    return fail(
                                        format!("`bearer.tokens.{principal}` must be a string"),
                                        None,
                                    );
                                };
                                tokens.push(BearerToken {
                                    token: token.to_owned(),
                                    principal: principal.clone(),
                                });
                            }
                        }
                        if tokens.iter().any(|t| t.token.is_empty()) || tokens.is_empty() {
                            return fail(
                                "`bearer` needs a non-empty `token` or `tokens`".into(),
                                None,
                            );
                        }
                        AuthPolicy::Bearer { tokens }
                    }
                    "shared_secret" | "hmac_signature" => {
                        let allowed: &[&str] = if name == "shared_secret" {
                            &["header", "secret"]
                        } else {
                            &["header", "secret", "prefix"]
                        };
                        if let Some(k) = unknown(allowed) {
                            return fail(
                                format!("unknown field `{k}` in `{name}`"),
                                Some(format!("fields: {}", allowed.join(", "))),
                            );
                        }
                        let (Some(header), Some(secret)) = (get("header"), get("secret")) else {
                            return fail(format!("`{name}` needs `header` and `secret`"), None);
                        };
                        if name == "shared_secret" {
                            AuthPolicy::SharedSecret { header, secret }
                        } else {
                            AuthPolicy::HmacSignature {
                                header,
                                secret,
                                prefix: get("prefix"),
                            }
                        }
                    }
                    "jwt" => match parse_jwt(settings) {
                        Ok(policy) => policy,
                        Err((message, hint)) => return fail(message, hint),
                    },
                    other => {
                        let hint = names::did_you_mean(other, TABLE_POLICIES.iter().copied())
                            .map(|s| format!("did you mean `{s}`?"));
                        return fail(format!("unknown auth policy `{other}`"), hint);
                    }
                }
            }
            _ => {
                return fail(
                    "each `auth` entry is a policy name or a one-key table".into(),
                    None,
                );
            }
        };
        if policy == AuthPolicy::PublicEndpoint && kind == ChannelKind::Http {
            return fail(
                "`public_endpoint` never opens the built-in session API".into(),
                Some("use `bearer` or `allow_all` (behind your own proxy) instead".into()),
            );
        }
        out.push(policy);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sizes_read_with_binary_and_decimal_units() {
        assert_eq!(parse_size("25MiB"), Ok(25 * 1024 * 1024));
        assert_eq!(parse_size(" 512 kib "), Ok(512 * 1024));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("1048576"), Ok(1_048_576));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(
            parse_size("25 MiBs")
                .unwrap_err()
                .contains("unknown unit `mibs`")
        );
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999999999GiB").is_err());
    }
}
