//! A small client of Slack's Web API: JSON POSTs to `<api_url>/<method>`
//! with a bearer token, Slack's `{"ok": false, "error": "…"}` answers as
//! errors naming the method and Slack's code, and `429` answers waited
//! out for their `Retry-After` (a few times, then given up). The base URL
//! is configurable (a proxy, or a test server speaking the same format).
//! Tokens never appear in errors or logs.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// How many `429`s one call waits out before it gives up.
const MAX_RATE_LIMIT_RETRIES: u32 = 5;

/// The longest `Retry-After` honoured (a longer one fails the call).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A failed Web API call: Slack's error code (`channel_not_found`,
/// `ratelimited`, …) when it answered one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) method: String,
    pub(crate) code: String,
    pub(crate) message: String,
}

impl ApiError {
    /// A failure that says nothing about the method itself: the network,
    /// an HTTP error, a rate limit that did not clear.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self.code.as_str(),
            "unreachable" | "http" | "client" | "ratelimited" | "internal_error" | "fatal_error"
        )
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Slack `{}`: {}", self.method, self.message)
    }
}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Error {
        Error::Upstream {
            message: e.to_string(),
        }
    }
}

enum Body<'a> {
    Json(&'a Value),
    Form(String),
}

/// `application/x-www-form-urlencoded` escaping of one key or value.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// One token against one base URL. Cheap to clone.
#[derive(Clone)]
pub(crate) struct SlackApi {
    base: String,
    token: String,
}

impl fmt::Debug for SlackApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackApi")
            .field("base", &self.base)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl SlackApi {
    pub(crate) fn new(base: &str, token: &str) -> SlackApi {
        SlackApi {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
        }
    }

    /// Calls `method` with a JSON body; the answer when `ok` is true.
    pub(crate) async fn call(&self, method: &str, body: &Value) -> Result<Value, ApiError> {
        self.send(method, Body::Json(body)).await.map(|(v, _)| v)
    }

    /// `auth.test`: who the token is, and its scopes (Slack's
    /// `x-oauth-scopes` answer header).
    pub(crate) async fn auth_test(&self) -> Result<(Value, Vec<String>), ApiError> {
        let (v, scopes) = self.send("auth.test", Body::Form(String::new())).await?;
        let scopes = scopes
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        Ok((v, scopes))
    }

    /// Calls a read method (`users.info`, `auth.test`) with form fields:
    /// Slack's read methods do not take JSON bodies.
    pub(crate) async fn call_form(
        &self,
        method: &str,
        fields: &[(&str, &str)],
    ) -> Result<Value, ApiError> {
        let encoded = fields
            .iter()
            .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        self.send(method, Body::Form(encoded)).await.map(|(v, _)| v)
    }

    /// The answer and its `x-oauth-scopes` header.
    async fn send(
        &self,
        method: &str,
        body: Body<'_>,
    ) -> Result<(Value, Option<String>), ApiError> {
        let url = format!("{}/{method}", self.base);
        let shown = agentkit_plumbing::redact_credentials(&url);
        let fail = |code: &str, message: String| ApiError {
            method: method.to_owned(),
            code: code.to_owned(),
            message,
        };
        let mut waited = 0;
        loop {
            let req = crate::deliver::request(reqwest::Method::POST, &url)
                .map_err(|e| fail("client", e.to_string()))?
                .bearer_auth(&self.token);
            let req = match &body {
                Body::Json(v) => req.json(v),
                Body::Form(f) => req
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(f.clone()),
            };
            let resp = req.send().await.map_err(|e| {
                fail(
                    "unreachable",
                    format!("POST {shown}: {}", agentkit_plumbing::http_error_text(e)),
                )
            })?;
            let status = resp.status().as_u16();
            if status == 429 {
                let after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map_or(Duration::from_secs(1), Duration::from_secs);
                if waited >= MAX_RATE_LIMIT_RETRIES || after > MAX_RETRY_AFTER {
                    return Err(fail(
                        "ratelimited",
                        format!("rate limited (Retry-After {}s); giving up", after.as_secs()),
                    ));
                }
                waited += 1;
                tracing::info!(
                    method,
                    retry_after = after.as_secs(),
                    "Slack rate limit: waiting"
                );
                tokio::time::sleep(after).await;
                continue;
            }
            let scopes = resp
                .headers()
                .get("x-oauth-scopes")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let text = resp.text().await.unwrap_or_default();
            let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if !(200..300).contains(&status) {
                return Err(fail(
                    "http",
                    format!(
                        "HTTP {status}: {}",
                        text.chars().take(200).collect::<String>()
                    ),
                ));
            }
            if value.get("ok") == Some(&Value::Bool(true)) {
                return Ok((value, scopes));
            }
            let code = value
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("not_ok")
                .to_owned();
            return Err(fail(&code, format!("Slack answered `{code}`")));
        }
    }

    /// `chat.postMessage` in a thread; the new message's `ts`.
    pub(crate) async fn post(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: Option<&Value>,
    ) -> Result<String, ApiError> {
        let mut body = json!({"channel": channel, "text": text});
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        if let Some(b) = blocks {
            body["blocks"] = b.clone();
        }
        let answer = self.call("chat.postMessage", &body).await?;
        Ok(answer
            .get("ts")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned())
    }

    /// `chat.update` of message `ts`.
    pub(crate) async fn update(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: Option<&Value>,
    ) -> Result<(), ApiError> {
        let mut body = json!({"channel": channel, "ts": ts, "text": text});
        if let Some(b) = blocks {
            body["blocks"] = b.clone();
        }
        self.call("chat.update", &body).await.map(|_| ())
    }
}

/// `host.slack`: the Web API with a slack channel's bot token, for tools,
/// channel handlers and schedules. Cheap to clone; the token never shows.
#[derive(Debug, Clone)]
pub struct SlackClient {
    api: SlackApi,
}

impl SlackClient {
    pub(crate) fn new(api: SlackApi) -> SlackClient {
        SlackClient { api }
    }

    /// Posts `text` in `channel` (in a thread when `thread_ts` is set);
    /// the new message's `ts`.
    pub async fn post(&self, channel: &str, thread_ts: Option<&str>, text: &str) -> Result<String> {
        Ok(self.api.post(channel, thread_ts, text, None).await?)
    }

    /// Replaces the text of message `ts`.
    pub async fn update(&self, channel: &str, ts: &str, text: &str) -> Result<()> {
        Ok(self.api.update(channel, ts, text, None).await?)
    }

    /// Adds the reaction `emoji` (a name, without colons) to message `ts`
    /// (needs the `reactions:write` scope).
    pub async fn react(&self, channel: &str, ts: &str, emoji: &str) -> Result<()> {
        let body = json!({"channel": channel, "timestamp": ts, "name": emoji.trim_matches(':')});
        self.api.call("reactions.add", &body).await?;
        Ok(())
    }

    /// Any Web API method with a JSON body; Slack's answer when `ok`.
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value> {
        Ok(self.api.call(method, body).await?)
    }
}
