//! Mounting channels for one agent: matching a request to a route, running
//! the channel's auth chain over the raw request, validating the body and
//! query against the route's schemas (400 with every violation), calling
//! the handler; and feeding each channel's event handlers from the host's
//! event tap, in order per session and never in a turn's way.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentkit_auth::{Chain, RequestParts};
use agentkit_manifest::{CompiledSchema, Method};
use agentkit_protocol::api::{ChannelInfo, ChannelRouteInfo};
use agentkit_protocol::{Event, EventType};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::{
    ChannelContext, ChannelDefinition, ChannelResponse, EventArgs, HandlerArgs, SessionHost,
};
use crate::error::{Error, Result};
use crate::state::StateStore;

/// How an agent's channels are mounted.
#[derive(Debug, Clone)]
pub struct ChannelHostOptions {
    /// `<stateRoot>/<slug>`: channel state lives under `channels/<id>/`.
    pub state_dir: PathBuf,
    /// `/<slug>`, or empty in single mode.
    pub prefix: String,
    /// The chain of channels that author none.
    pub default_chain: Chain,
    /// The per-session state hosts share (`--database-url`); `None`: this
    /// host's files under `state_dir`.
    pub states: Option<Arc<dyn crate::api::ChannelStates>>,
}

/// One request to a channel, framework-free.
#[derive(Debug, Clone, Default)]
pub struct ChannelRequest {
    pub method: String,
    /// The path after `/v1/channels/<id>` (`/` when empty).
    pub path: String,
    pub query: Option<String>,
    /// Names lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub peer: Option<IpAddr>,
}

struct Mounted {
    def: ChannelDefinition,
    chain: Chain,
    ctx: ChannelContext,
    /// Each route's (body, query) schemas, compiled once at mount.
    schemas: Vec<(Option<CompiledSchema>, Option<CompiledSchema>)>,
}

/// The mounted channels of one agent. Cheap to clone.
#[derive(Clone)]
pub struct ChannelHost {
    inner: Arc<Inner>,
}

struct Inner {
    channels: Vec<Mounted>,
    tasks: TaskTracker,
    stop: CancellationToken,
}

impl std::fmt::Debug for ChannelHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelHost")
            .field(
                "channels",
                &self
                    .inner
                    .channels
                    .iter()
                    .map(|c| &c.def.id)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ChannelHost {
    /// Checks every route, runs each `on_start`, and starts delivering
    /// events to the channels that handle them.
    pub async fn start(
        defs: Vec<ChannelDefinition>,
        host: Arc<dyn SessionHost>,
        options: ChannelHostOptions,
    ) -> Result<ChannelHost> {
        let tasks = TaskTracker::new();
        let mut channels = Vec::new();
        for def in defs {
            for r in &def.routes {
                r.check().map_err(|message| Error::Config {
                    channel: def.id.clone(),
                    message,
                })?;
            }
            let compile = |s: &Option<Value>| -> Result<Option<CompiledSchema>> {
                s.as_ref()
                    .map(CompiledSchema::compile)
                    .transpose()
                    .map_err(|e| Error::Config {
                        channel: def.id.clone(),
                        message: format!("invalid schema: {e}"),
                    })
            };
            let mut schemas = Vec::new();
            for r in &def.routes {
                schemas.push((compile(&r.body_schema)?, compile(&r.query_schema)?));
            }
            let chain = def
                .auth
                .clone()
                .unwrap_or_else(|| options.default_chain.clone());
            // A secret from an unset `${VAR}` disables its policy (it never
            // admits; `validate` warns about the variable): serve the rest
            // of the chain and say so. Other problems are configuration
            // errors.
            let disabled = chain.check_for_serving().map_err(|message| Error::Config {
                channel: def.id.clone(),
                message: format!("auth chain: {message}"),
            })?;
            for e in disabled {
                tracing::warn!(channel = %def.id, "{e}: is its `${{VAR}}` set?");
            }
            let ctx = ChannelContext {
                channel: def.id.clone(),
                host: host.clone(),
                tasks: tasks.clone(),
                states: StateStore::new(
                    options
                        .state_dir
                        .join("channels")
                        .join(&def.id)
                        .join("state"),
                )
                .shared(options.states.clone(), &def.id),
                default_state: def.state.clone(),
                prefix: options.prefix.clone(),
            };
            channels.push(Mounted {
                def,
                chain,
                ctx,
                schemas,
            });
        }
        for c in &channels {
            if let Some(start) = &c.def.on_start {
                start(c.ctx.clone()).await?;
            }
        }
        let inner = Arc::new(Inner {
            channels,
            tasks,
            stop: CancellationToken::new(),
        });
        if inner.channels.iter().any(|c| !c.def.events.is_empty()) {
            let rx = host.tap();
            let inner2 = inner.clone();
            inner.tasks.spawn(event_loop(inner2, host, rx));
        }
        Ok(ChannelHost { inner })
    }

    /// The context of channel `id` (what its handlers reach the host
    /// through), for host code that sends into it.
    pub fn context(&self, id: &str) -> Option<ChannelContext> {
        self.inner
            .channels
            .iter()
            .find(|c| c.def.id == id)
            .map(|c| c.ctx.clone())
    }

    /// Is a channel with this id mounted?
    pub fn has(&self, id: &str) -> bool {
        self.inner.channels.iter().any(|c| c.def.id == id)
    }

    /// Answers one request to channel `id`.
    pub async fn dispatch(&self, id: &str, req: ChannelRequest) -> ChannelResponse {
        match self.try_dispatch(id, req).await {
            Ok(r) => r,
            Err(e) => ChannelResponse::from_error(&e),
        }
    }

    async fn try_dispatch(&self, id: &str, req: ChannelRequest) -> Result<ChannelResponse> {
        let Some(channel) = self.inner.channels.iter().find(|c| c.def.id == id) else {
            return Err(Error::NoRoute {
                status: 404,
                message: format!("no channel `{id}`"),
            });
        };
        let path = if req.path.is_empty() {
            "/"
        } else {
            req.path.as_str()
        };
        let mut shape_matched = false;
        let mut found = None;
        for (i, r) in channel.def.routes.iter().enumerate() {
            if let Some(params) = match_path(&r.path, path) {
                shape_matched = true;
                if r.method.as_str().eq_ignore_ascii_case(&req.method) {
                    found = Some((i, r, params));
                    break;
                }
            }
        }
        let Some((index, route, params)) = found else {
            return Err(if shape_matched {
                Error::NoRoute {
                    status: 405,
                    message: format!("channel `{id}` has no {} route at `{path}`", req.method),
                }
            } else {
                Error::NoRoute {
                    status: 404,
                    message: format!("channel `{id}` has no route `{path}`"),
                }
            });
        };
        // The chain sees the raw request, body included, before anything
        // is parsed (signatures are over the raw bytes).
        let host_header = req
            .headers
            .iter()
            .find(|(n, _)| n == "host")
            .map(|(_, v)| v.as_str());
        let mut parts = RequestParts::new(req.peer).with_body(&req.body);
        if let Some(h) = host_header {
            parts = parts.with_host(h);
        }
        for (name, value) in &req.headers {
            parts.headers.push((name.as_str(), value.as_bytes()));
        }
        let auth = match channel.chain.admit(&parts).await {
            Ok(ctx) => ctx,
            Err(denied) => {
                tracing::info!(channel = id, peer = ?req.peer, reasons = ?denied.refusals(), "channel request denied");
                return Err(Error::Unauthorized);
            }
        };
        if wrongly_signed(&auth, &channel.def.signature_headers, &req.headers) {
            tracing::info!(channel = id, peer = ?req.peer, "a delivery whose signature failed was refused on loopback");
            return Err(Error::Unauthorized);
        }
        let form = req.headers.iter().any(|(n, v)| {
            n == "content-type"
                && v.get(..33)
                    .is_some_and(|t| t.eq_ignore_ascii_case("application/x-www-form-urlencoded"))
        });
        let body = if route.method == Method::Get || req.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else if form {
            form_body(&channel.def.form_bodies, &req.body)?
        } else {
            serde_json::from_slice(&req.body)
                .map_err(|e| Error::bad_request(format!("the body is not JSON: {e}")))?
        };
        let query = parse_query(
            req.query.as_deref().unwrap_or(""),
            route.query_schema.as_ref(),
        );
        let (body_schema, query_schema) = &channel.schemas[index];
        if let Some(schema) = body_schema {
            validate("the body", schema, &body)?;
        }
        if let Some(schema) = query_schema {
            validate("the query", schema, &query)?;
        }
        let args = HandlerArgs {
            body,
            query,
            params,
            auth,
            request_ip: req.peer,
            headers: req.headers,
            raw_body: req.body,
            ctx: channel.ctx.clone(),
        };
        (route.handler)(args).await
    }

    /// The kind of channel `id` (`webhook`, `github`, `slack`, ...).
    pub fn kind(&self, id: &str) -> Option<&str> {
        self.inner
            .channels
            .iter()
            .find(|c| c.def.id == id)
            .map(|c| c.def.kind.as_str())
    }

    /// The largest body channel `id` reads, when it sets its own
    /// (`max_body`); `None`: the host's limit.
    pub fn max_body(&self, id: &str) -> Option<usize> {
        self.inner
            .channels
            .iter()
            .find(|c| c.def.id == id)
            .and_then(|c| c.def.max_body)
    }

    /// The channels for `GET /v1/info`: routes with their full paths and
    /// schemas, event handlers, body limits, and what each pack adds.
    pub fn describe(&self) -> Vec<ChannelInfo> {
        self.inner
            .channels
            .iter()
            .map(|c| {
                let base = format!("{}/v1/channels/{}", c.ctx.prefix, c.def.id);
                let routes = c
                    .def
                    .routes
                    .iter()
                    .map(|r| ChannelRouteInfo {
                        method: r.method.as_str().to_owned(),
                        path: r.path.clone(),
                        url: if r.path == "/" {
                            base.clone()
                        } else {
                            format!("{base}{}", r.path)
                        },
                        description: r.description.clone(),
                        body_schema: r.body_schema.clone(),
                        query_schema: r.query_schema.clone(),
                    })
                    .collect();
                ChannelInfo {
                    id: c.def.id.clone(),
                    kind: c.def.kind.clone(),
                    description: c.def.description.clone(),
                    url: base,
                    routes,
                    events: c.def.events.iter().map(|(k, _)| k.clone()).collect(),
                    max_body: c.def.max_body.and_then(|n| u64::try_from(n).ok()),
                    pack: c.def.info.clone(),
                }
            })
            .collect()
    }

    /// Runs every `on_stop`, ends event delivery, and waits up to `grace`
    /// for work handed to `wait_until` and in-flight deliveries.
    pub async fn stop(&self, grace: Duration) {
        for c in &self.inner.channels {
            if let Some(stop) = &c.def.on_stop {
                stop().await;
            }
        }
        self.inner.stop.cancel();
        self.inner.tasks.close();
        if tokio::time::timeout(grace, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("channel work did not finish within {grace:?}");
        }
    }
}

/// A request that carries a signature header but was admitted only by a
/// loopback policy: the signature policy, which runs first, refused it.
/// `--dev` admits unsigned loopback deliveries, never wrongly signed (or,
/// for Slack, stale) ones.
fn wrongly_signed(
    auth: &agentkit_auth::AuthContext,
    signature_headers: &[String],
    headers: &[(String, String)],
) -> bool {
    let by_loopback = matches!(
        auth.authenticator.as_str(),
        "loopbackOnly" | "localDev" | "localDevStrict"
    );
    by_loopback
        && headers
            .iter()
            .any(|(n, _)| signature_headers.iter().any(|h| h.eq_ignore_ascii_case(n)))
}

/// A form-encoded body as the channel reads it: an object of its fields,
/// the JSON document in its `payload` field, or a 415.
fn form_body(how: &crate::api::FormBodies, raw: &[u8]) -> Result<Value> {
    use crate::api::FormBodies;
    let fields = parse_query(&String::from_utf8_lossy(raw), None);
    match how {
        FormBodies::Fields => Ok(fields),
        FormBodies::PayloadField => {
            let Some(payload) = fields.get("payload") else {
                return Err(Error::bad_request(
                    "a form-encoded delivery carries its JSON in a `payload` field, and this body has none",
                ));
            };
            let Some(text) = payload.as_str() else {
                return Err(Error::bad_request(
                    "the form's `payload` field is given more than once",
                ));
            };
            serde_json::from_str(text).map_err(|e| {
                Error::bad_request(format!("the form's `payload` field is not JSON: {e}"))
            })
        }
        FormBodies::JsonOnly(provider) => Err(Error::UnsupportedMediaType {
            message: format!(
                "{provider} sends webhooks as JSON only: a form-encoded body is not a {provider} delivery (send `Content-Type: application/json`)"
            ),
        }),
    }
}

/// Matches `/a/:b` against `/a/x`; the parameters, percent-decoded.
pub(crate) fn match_path(pattern: &str, path: &str) -> Option<BTreeMap<String, String>> {
    let p: Vec<&str> = pattern.trim_end_matches('/').split('/').collect();
    let a: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    if p.len() != a.len() {
        return None;
    }
    let mut params = BTreeMap::new();
    for (ps, s) in p.iter().zip(&a) {
        if let Some(name) = ps.strip_prefix(':') {
            if s.is_empty() {
                return None;
            }
            params.insert(name.to_owned(), percent_decode(s));
        } else if ps != s {
            return None;
        }
    }
    Some(params)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(
                    std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                    16,
                ) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The query string as an object; repeated keys become arrays, and values
/// whose schema property is a number, integer or boolean are converted
/// when they parse as one.
pub(crate) fn parse_query(query: &str, schema: Option<&Value>) -> Value {
    let mut map = Map::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (percent_decode(k), percent_decode(v));
        let ty = schema
            .and_then(|s| {
                s.pointer(&format!(
                    "/properties/{}/type",
                    k.replace('~', "~0").replace('/', "~1")
                ))
            })
            .and_then(Value::as_str);
        let value = match ty {
            Some("integer") => v
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or(Value::String(v)),
            Some("number") => v
                .parse::<f64>()
                .ok()
                .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                .unwrap_or(Value::String(v)),
            Some("boolean") => match v.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(v),
            },
            _ => Value::String(v),
        };
        match map.get_mut(&k) {
            Some(Value::Array(items)) => items.push(value),
            Some(prev) => {
                let first = prev.take();
                *prev = Value::Array(vec![first, value]);
            }
            None => {
                map.insert(k, value);
            }
        }
    }
    Value::Object(map)
}

fn validate(what: &'static str, schema: &CompiledSchema, value: &Value) -> Result<()> {
    let errors = schema.errors(value);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Schema { what, errors })
    }
}

type Workers = HashMap<(usize, String), mpsc::UnboundedSender<Arc<Event>>>;

/// Routes every published event of a channel's sessions to that channel's
/// handlers, through one worker per (channel, session) so a session's
/// events are handled in order and a slow delivery holds up only its own
/// session.
async fn event_loop(
    inner: Arc<Inner>,
    host: Arc<dyn SessionHost>,
    mut rx: tokio::sync::broadcast::Receiver<Arc<Event>>,
) {
    let workers: Arc<Mutex<Workers>> = Arc::default();
    loop {
        let event = tokio::select! {
            () = inner.stop.cancelled() => break,
            r = rx.recv() => match r {
                Ok(e) => e,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "channel event handlers fell behind and missed events");
                    continue;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            },
        };
        let Some(session) = host.session(event.session_id.as_str()).await else {
            continue;
        };
        let Some(index) = inner
            .channels
            .iter()
            .position(|c| c.def.id == session.channel)
        else {
            continue;
        };
        let channel = &inner.channels[index];
        let wanted = channel
            .def
            .events
            .iter()
            .any(|(k, _)| k == "*" || k == event.event_type.as_str());
        if !wanted {
            continue;
        }
        let ends = matches!(
            event.event_type,
            EventType::SessionCompleted | EventType::SessionFailed
        );
        let key = (index, session.id.clone());
        let mut map = workers.lock().unwrap_or_else(|e| e.into_inner());
        let tx = map.entry(key.clone()).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            let inner = inner.clone();
            let args = EventArgs {
                session: session.clone(),
                ctx: channel.ctx.clone(),
            };
            inner
                .tasks
                .clone()
                .spawn(session_worker(inner, index, args, rx));
            tx
        });
        // A worker that is gone, or a session that ended, needs no
        // worker any more.
        if tx.send(event).is_err() || ends {
            map.remove(&key);
        }
    }
}

async fn session_worker(
    inner: Arc<Inner>,
    index: usize,
    args: EventArgs,
    mut rx: mpsc::UnboundedReceiver<Arc<Event>>,
) {
    let channel = &inner.channels[index];
    loop {
        let event = tokio::select! {
            () = inner.stop.cancelled() => break,
            e = rx.recv() => match e { Some(e) => e, None => break },
        };
        for (key, handler) in &channel.def.events {
            if key != "*" && key != event.event_type.as_str() {
                continue;
            }
            if let Err(e) = handler(event.clone(), args.clone()).await {
                tracing::warn!(channel = %channel.def.id, session = %args.session.id, event = %event.event_type, error = %e, "channel event handler failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn paths_match_with_parameters() {
        let p = match_path("/expense/:team", "/expense/a%20b").unwrap();
        assert_eq!(p["team"], "a b");
        assert!(match_path("/expense/:team", "/expense").is_none());
        assert!(match_path("/", "/").unwrap().is_empty());
        assert!(match_path("/a", "/b").is_none());
    }

    #[test]
    fn query_values_follow_the_schema_types() {
        let schema = json!({"properties": {"n": {"type": "integer"}, "b": {"type": "boolean"}}});
        let q = parse_query("n=3&b=true&s=x&s=y&c=a%2Fb", Some(&schema));
        assert_eq!(q, json!({"n": 3, "b": true, "s": ["x", "y"], "c": "a/b"}));
    }
}
