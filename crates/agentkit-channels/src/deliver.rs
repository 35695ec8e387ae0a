//! Event deliveries: POST a rendered body (or the event) to a URL, signed
//! with HMAC-SHA256 when configured, retried with exponential backoff on
//! network errors, 429 and 5xx. Every attempt is logged, one JSON line per
//! attempt, to `<stateDir>/channels/<id>/deliveries/<sessionId>.ndjson`
//! (the session's delivery trace). Deliveries run on the channel's event
//! workers, never on a turn's path.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use agentkit_manifest::Delivery;
use agentkit_protocol::Event;
use serde_json::{Value, json};

use crate::api::EventArgs;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::template::render_value;

/// Retry policy and the HTTP client of deliveries. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Deliverer {
    client: reqwest::Client,
    state_dir: PathBuf,
    /// Attempts in all (at least 1).
    pub attempts: u32,
    /// The wait before the first retry; doubled for each further one.
    pub backoff: Duration,
}

impl Deliverer {
    /// `state_dir` is the agent's (`<stateRoot>/<slug>`).
    pub fn new(state_dir: PathBuf) -> Deliverer {
        Deliverer {
            client: http_client(),
            state_dir,
            attempts: 5,
            backoff: Duration::from_millis(250),
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

    /// Delivers `event` per `d`, then merges `d.state` into the session's
    /// channel state.
    pub async fn deliver(
        &self,
        d: &Delivery,
        env: &Env,
        event: &Event,
        args: &EventArgs,
    ) -> Result<()> {
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
        let url = env.resolve(&d.post);
        let mut req = self
            .client
            .post(&url)
            .header("content-type", "application/json")
            .header("x-agentkit-event", event.event_type.as_str())
            .header("x-agentkit-session", event.session_id.as_str());
        for (k, v) in &d.headers {
            req = req.header(k.as_str(), env.resolve(v));
        }
        if let (Some(secret), Some(header)) = (&d.signature_secret, &d.signature_header) {
            req = req.header(
                header.as_str(),
                format!("sha256={}", sign(&env.resolve(secret), &bytes)),
            );
        }
        let channel = args.ctx.channel_id().to_owned();
        let session = args.session.id.clone();
        let mut wait = self.backoff;
        let mut last = String::new();
        for attempt in 1..=self.attempts.max(1) {
            let Some(r) = req.try_clone() else { break };
            let outcome = r.body(bytes.clone()).send().await;
            let (status, ok, retry, response) = match outcome {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let text = resp.text().await.unwrap_or_default();
                    let ok = (200..300).contains(&status);
                    (
                        Some(status),
                        ok,
                        status == 429 || status >= 500,
                        serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
                    )
                }
                Err(e) => {
                    last = e.to_string();
                    (None, false, true, Value::Null)
                }
            };
            self.log(
                &channel,
                &session,
                &json!({
                    "at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    "event": event.event_type.as_str(),
                    "eventIndex": event.index,
                    "url": url,
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
            if !retry || attempt == self.attempts {
                break;
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        Err(Error::Upstream {
            message: format!("delivery of {} to {url} failed: {last}", event.event_type),
        })
    }
}

/// The hex HMAC-SHA256 of `body` keyed with `secret` (the signature of
/// deliveries and pack webhooks; signing lives in `agentkit-auth`).
pub use agentkit_auth::sign_body as sign;

pub(crate) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .user_agent(concat!("agentkit/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
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
