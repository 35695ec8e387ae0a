//! Declarative webhook channels (`channels/<id>.toml`, `kind = "webhook"`)
//! built on the channel API: each route renders its `send` or `call_tool`
//! templates over `body`, `query`, `params` and `auth` (a `call_tool`
//! followed by a `send` also over the tool's envelope, `tool`), and answers
//! with the action's result or the templated `response`; a
//! `[routes.handler]` runs a program that answers instead. Each
//! `[events."…"]` entry becomes an event handler that POSTs a delivery.

use std::sync::Arc;

use agentkit_manifest::{Channel, Delivery, Route, RouteAction, RouteHandler, SendAction};
use serde_json::{Value, json};

use crate::api::{ChannelDefinition, ChannelResponse, HandlerArgs, RouteDef, SendOptions};
use crate::deliver::{Deliverer, resolve_delivery};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::template::{render, render_value};

/// The channel API form of a declarative webhook channel. `chain` is its
/// auth chain (the facade converts the authored one, resolving secrets).
pub fn webhook_channel(
    channel: &Channel,
    chain: Option<agentkit_auth::Chain>,
    env: Env,
    deliverer: Deliverer,
) -> ChannelDefinition {
    let mut def = ChannelDefinition::new(channel.id.clone());
    def.kind = "webhook".into();
    def.auth = chain;
    def.state = channel.state.clone();
    def.max_body = channel.max_body.and_then(|n| usize::try_from(n).ok());
    for route in &channel.routes {
        let r = Arc::new(resolve_route_env(route, &env));
        let mut rd = RouteDef::new(route.method, route.path.clone(), move |args| {
            let r = r.clone();
            async move { handle(&r, args).await }
        });
        rd.description = route.description.clone();
        rd.body_schema = route.body_schema.clone();
        rd.query_schema = route.query_schema.clone();
        def.routes.push(rd);
    }
    for (event, delivery) in &channel.events {
        let d = Arc::new(resolve_delivery(delivery, &env));
        let deliverer = deliverer.clone();
        def = def.on_event(event.clone(), move |event, args| {
            let d: Arc<Delivery> = d.clone();
            let deliverer = deliverer.clone();
            async move { deliverer.deliver(&d, &event, &args).await }
        });
    }
    def
}

/// The route with the `${VAR}` references of its send templates resolved
/// (at startup, as every other string of a channel file): the minijinja
/// syntax (`{{ body.x }}`) is not a reference and stays as written. An
/// unset `${VAR:?msg}` never gets here: the host refuses to start first.
fn resolve_route_env(route: &Route, env: &Env) -> Route {
    let mut route = route.clone();
    let send = match &mut route.action {
        RouteAction::Send(s) | RouteAction::CallToolThenSend { send: s, .. } => s,
        _ => return route,
    };
    send.message = env.resolve(&send.message);
    for t in [
        &mut send.continuation,
        &mut send.title,
        &mut send.purpose,
        &mut send.as_of,
    ]
    .into_iter()
    .flatten()
    {
        *t = env.resolve(t);
    }
    for t in send.workspace_files.values_mut() {
        *t = env.resolve(t);
    }
    route
}

/// Runs a `[routes.handler]` program: the request as JSON on stdin, its
/// stdout as the answer (`{status, headers?, body}`, or any other JSON as
/// a 200 body). A program that fails (non-zero exit, timeout, output cap)
/// answers 502 without its stderr, which goes to the log.
async fn run_handler(
    route: &Route,
    handler: &RouteHandler,
    args: &HandlerArgs,
) -> Result<ChannelResponse> {
    let label = format!(
        "route handler {} /v1/channels/{}{}",
        route.method.as_str(),
        args.ctx.channel_id(),
        route.path
    );
    let headers: serde_json::Map<String, Value> = handler
        .headers
        .iter()
        .filter_map(|name| {
            args.header(name)
                .map(|v| (name.clone(), Value::String(v.to_owned())))
        })
        .collect();
    let request = json!({
        "channel": args.ctx.channel_id(),
        "method": route.method.as_str(),
        "path": route.path,
        "params": args.params,
        "query": args.query,
        "body": args.body,
        "principal": args.auth,
        "headers": headers,
        "state": args.ctx.default_state(),
    });
    let out = args
        .ctx
        .run_handler(&label, handler, request, &args.auth)
        .await?;
    if out.is_error {
        tracing::warn!(handler = %label, error = %out.output, "route handler failed");
        return Ok(ChannelResponse::json(
            502,
            agentkit_protocol::ErrorBody::new(
                agentkit_protocol::ErrorCode::UpstreamError,
                "the route's handler failed; see the server log",
            )
            .to_json(),
        ));
    }
    Ok(handler_response(out.output))
}

/// A handler's stdout as a response: an object with an integer `status`
/// (100-599) and only `status`, `headers` and `body` is an envelope; any
/// other JSON is a 200 body.
fn handler_response(output: Value) -> ChannelResponse {
    let envelope = output.as_object().and_then(|obj| {
        let status = obj.get("status")?.as_u64()?;
        let status = u16::try_from(status)
            .ok()
            .filter(|s| (100..=599).contains(s))?;
        obj.keys()
            .all(|k| ["status", "headers", "body"].contains(&k.as_str()))
            .then_some((status, obj))
    });
    let Some((status, obj)) = envelope else {
        return ChannelResponse::json(200, output);
    };
    let headers = obj
        .get("headers")
        .and_then(Value::as_object)
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    ChannelResponse {
        status,
        headers,
        body: obj.get("body").cloned().unwrap_or(Value::Null),
    }
}

fn template_ctx(args: &HandlerArgs) -> Value {
    json!({
        "body": args.body,
        "query": args.query,
        "params": args.params,
        "auth": args.auth,
    })
}

fn opt(field: &str, t: &Option<String>, ctx: &Value) -> Result<Option<String>> {
    match t {
        None => Ok(None),
        Some(t) => {
            let s = render(field, t, ctx)?;
            Ok((!s.trim().is_empty()).then_some(s))
        }
    }
}

async fn send(s: &SendAction, args: &HandlerArgs, ctx: &Value) -> Result<(u16, Value)> {
    let message = render("send.message", &s.message, ctx)?;
    let mut files = Vec::new();
    for (path, t) in &s.workspace_files {
        files.push((
            path.clone(),
            render("send.workspace_files", t, ctx)?.into_bytes(),
        ));
    }
    let options = SendOptions {
        continuation_token: opt("send.continuation", &s.continuation, ctx)?,
        admission: s.admission.unwrap_or_default(),
        workspace_files: files,
        title: opt("send.title", &s.title, ctx)?,
        purpose: opt("send.purpose", &s.purpose, ctx)?,
        dry_run: s.dry_run.unwrap_or(false),
        as_of: opt("send.as_of", &s.as_of, ctx)?,
        wait: s.wait,
        output_schema: s.output_schema.clone(),
        ..SendOptions::default()
    };
    let session = args.ctx.send(message, options, &args.auth).await?;
    let mut out = json!({"ok": true});
    if let (Some(obj), Value::Object(s), Value::Object(urls)) = (
        out.as_object_mut(),
        serde_json::to_value(&session).unwrap_or(Value::Null),
        args.ctx.session_urls(&session.id),
    ) {
        obj.extend(s);
        obj.extend(urls);
    }
    Ok((if s.wait { 200 } else { 202 }, out))
}

async fn handle(route: &Route, args: HandlerArgs) -> Result<ChannelResponse> {
    let mut ctx = template_ctx(&args);
    let (status, result) = match &route.action {
        RouteAction::Send(s) => send(s, &args, &ctx).await?,
        RouteAction::CallTool(call) => {
            let input = render_value("call_tool.input", &call.input, &ctx)?;
            let mut envelope = args.ctx.call_tool(&call.tool, input, None).await?;
            if let Some(obj) = envelope.as_object_mut() {
                obj.insert("ok".into(), Value::Bool(true));
            }
            (200, envelope)
        }
        RouteAction::CallToolThenSend { call_tool, send: s } => {
            let input = render_value("call_tool.input", &call_tool.input, &ctx)?;
            let envelope = args.ctx.call_tool(&call_tool.tool, input, None).await?;
            if envelope.get("isError").and_then(Value::as_bool) == Some(true) {
                // The tool's own error text is for the host's log; the
                // caller learns that it failed, not why.
                tracing::warn!(channel = %args.ctx.channel_id(), route = %route.path, tool = %call_tool.tool, result = %envelope["result"], "route tool call answered an error; nothing sent");
                return Ok(ChannelResponse::json(
                    502,
                    agentkit_protocol::ErrorBody::new(
                        agentkit_protocol::ErrorCode::UpstreamError,
                        format!(
                            "tool `{}` answered an error, so nothing was sent",
                            call_tool.tool
                        ),
                    )
                    .to_json(),
                ));
            }
            if let Some(obj) = ctx.as_object_mut() {
                obj.insert("tool".into(), envelope);
            }
            send(s, &args, &ctx).await?
        }
        RouteAction::Handler(h) => return run_handler(route, h, &args).await,
        RouteAction::Respond => (200, json!({"ok": true})),
    };
    let Some(response) = &route.response else {
        return Ok(ChannelResponse::json(status, result));
    };
    let mut ctx = ctx;
    if let Some(obj) = ctx.as_object_mut() {
        obj.insert("result".into(), result.clone());
    }
    let status = match &response.status {
        None => status,
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .unwrap_or(status),
        Some(Value::String(t)) => {
            let s = render("response.status", t, &ctx)?;
            match s.trim().parse::<u16>() {
                Ok(n) if (100..=599).contains(&n) => n,
                _ => {
                    return Err(Error::Template {
                        field: "response.status".into(),
                        message: format!("rendered `{s}`, which is not an HTTP status"),
                    });
                }
            }
        }
        Some(_) => status,
    };
    let body = match &response.body {
        None => result,
        Some(b) => render_value("response.body", b, &ctx)?,
    };
    Ok(ChannelResponse::json(status, body))
}
