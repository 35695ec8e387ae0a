//! Event deliveries: POST a rendered body (or the event) to a URL, signed
//! with HMAC-SHA256 when configured, retried on network errors, 429 and
//! 5xx with the plumbing's [`Backoff`] (jittered exponential waits, the
//! server's `Retry-After` honoured up to a cap). Every attempt is logged,
//! one JSON line per attempt, to
//! `<stateDir>/channels/<id>/deliveries/<sessionId>.ndjson` (the session's
//! delivery trace; URLs there and in errors have their credentials
//! removed). Deliveries run on the channel's event workers, never on a
//! turn's path. Every request of this crate goes through the process's one
//! HTTP client ([`request`]).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use agentkit_manifest::Delivery;
use agentkit_plumbing::{Backoff, RetryPolicy, http_error_text, redact_credentials};
use agentkit_protocol::Event;
use serde_json::{Value, json};

use crate::api::EventArgs;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::template::render_value;

/// How long one request of this crate (a delivery attempt, a pack's API
/// call) may take in all.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest server-given `Retry-After` a delivery waits.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// The most time one delivery spends waiting between its attempts.
const MAX_TOTAL_WAIT: Duration = Duration::from_secs(60);

/// The retry policy and the state folder of deliveries. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Deliverer {
    state_dir: PathBuf,
    /// Attempts in all (at least 1).
    pub attempts: u32,
    /// The longest wait before the first retry; the bound doubles for
    /// each further one (each wait is jittered between half of its bound
    /// and all of it).
    pub backoff: Duration,
}

impl Deliverer {
    /// `state_dir` is the agent's (`<stateRoot>/<slug>`).
    pub fn new(state_dir: PathBuf) -> Deliverer {
        Deliverer {
            state_dir,
            attempts: 5,
            backoff: Duration::from_millis(250),
        }
    }

    /// The one retry policy with this deliverer's numbers: the
    /// policy's first bound is twice its base, so the base is half of
    /// `backoff`.
    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_retries: self.attempts.max(1) - 1,
            base_delay: self.backoff / 2,
            max_delay: Duration::MAX,
            max_retry_after: MAX_RETRY_AFTER,
            max_total_wait: MAX_TOTAL_WAIT,
        }
    }

    fn log(&self, channel: &str, session: &str, line: &Value) {
        let dir = self
            .state_dir
            .join("channels")
            .join(channel)
            .join("deliveries");
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(format!("{session}.ndjson")))?;
            let mut bytes = serde_json::to_vec(line).unwrap_or_default();
            bytes.push(b'\n');
            f.write_all(&bytes)
        };
        if let Err(e) = write() {
            tracing::warn!(channel, session, error = %e, "cannot write the delivery log");
        }
    }

    /// Delivers `event` per `d` (its `${VAR}`s already resolved, see
    /// `resolve_delivery`), then merges `d.state` into the session's
    /// channel state.
    pub async fn deliver(&self, d: &Delivery, event: &Event, args: &EventArgs) -> Result<()> {
        let state = args.state()?;
        let mut ctx = json!({
            "event": event,
            "session": args.session,
            "state": state,
            "channel": args.ctx.channel_id(),
        });
        let body = match &d.body {
            Some(b) => render_value("body", b, &ctx)?,
            None => serde_json::to_value(event).unwrap_or(Value::Null),
        };
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let url = d.post.clone();
        // What logs and errors may show of the URL.
        let shown = redact_credentials(&url);
        let mut req = request(reqwest::Method::POST, &url)?
            .header("content-type", "application/json")
            .header("x-agentkit-event", event.event_type.as_str())
            .header("x-agentkit-session", event.session_id.as_str());
        for (k, v) in &d.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let (Some(secret), Some(header)) = (&d.signature_secret, &d.signature_header) {
            req = req.header(header.as_str(), format!("sha256={}", sign(secret, &bytes)));
        }
        let channel = args.ctx.channel_id().to_owned();
        let session = args.session.id.clone();
        let mut backoff = Backoff::new(self.retry_policy());
        let mut last = String::new();
        loop {
            let attempt = backoff.attempts();
            let Some(r) = req.try_clone() else { break };
            let outcome = r.body(bytes.clone()).send().await;
            let (status, ok, retry, response, retry_after) = match outcome {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let retry_after = agentkit_plumbing::retry_after_header(resp.headers());
                    let text = resp.text().await.unwrap_or_default();
                    let ok = (200..300).contains(&status);
                    (
                        Some(status),
                        ok,
                        status == 429 || status >= 500,
                        serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
                        retry_after,
                    )
                }
                Err(e) => {
                    last = http_error_text(e);
                    (None, false, true, Value::Null, None)
                }
            };
            self.log(
                &channel,
                &session,
                &json!({
                    "at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    "event": event.event_type.as_str(),
                    "eventIndex": event.index,
                    "url": shown,
                    "attempt": attempt,
                    "status": status,
                    "ok": ok,
                    "error": (status.is_none()).then(|| last.clone()),
                }),
            );
            if ok {
                if let Some(update) = &d.state {
                    if let Some(obj) = ctx.as_object_mut() {
                        obj.insert("response".into(), response);
                    }
                    let rendered = render_value("state", update, &ctx)?;
                    let mut next = match args.state()? {
                        Value::Object(m) => m,
                        _ => serde_json::Map::new(),
                    };
                    if let Value::Object(m) = rendered {
                        next.extend(m);
                    }
                    args.set_state(Value::Object(next))?;
                }
                return Ok(());
            }
            if let Some(s) = status {
                last = format!("HTTP {s}");
            }
            if !retry {
                break;
            }
            let Some(wait) = backoff.next_delay(retry_after) else {
                break;
            };
            tokio::time::sleep(wait).await;
        }
        Err(Error::Upstream {
            message: format!("delivery of {} to {shown} failed: {last}", event.event_type),
        })
    }
}

/// The hex HMAC-SHA256 of `body` keyed with `secret` (the signature of
/// deliveries and pack webhooks; signing lives in `agentkit-auth`).
pub use agentkit_auth::sign_body as sign;

/// A request on the process's one HTTP client
/// (`agentkit_plumbing::http_client`: connect timeout,
/// `agentkit/<version>` user agent), bounded by [`REQUEST_TIMEOUT`].
pub(crate) fn request(method: reqwest::Method, url: &str) -> Result<reqwest::RequestBuilder> {
    let client = agentkit_plumbing::http_client().map_err(|e| Error::Upstream {
        message: e.to_string(),
    })?;
    Ok(client.request(method, url).timeout(REQUEST_TIMEOUT))
}

/// `d` with its `${VAR}` references (target URL, headers, signing secret)
/// resolved through `env`: done once, when the channel is built.
pub(crate) fn resolve_delivery(d: &Delivery, env: &Env) -> Delivery {
    Delivery {
        post: env.resolve(&d.post),
        headers: d
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), env.resolve(v)))
            .collect(),
        signature_secret: d.signature_secret.as_deref().map(|s| env.resolve(s)),
        ..d.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GitHub's documented example: secret "It's a Secret to Everybody",
    /// payload "Hello, World!".
    #[test]
    fn signs_githubs_documented_test_vector() {
        assert_eq!(
            sign("It's a Secret to Everybody", b"Hello, World!"),
            "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }
}
