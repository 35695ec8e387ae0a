//! What `agentkit github`, `agentkit gitlab` and `agentkit bitbucket`
//! share: the pack channels of a project (URL path and published events)
//! and POSTing a delivery at one of them with the provider's headers and
//! signature, so replaying a saved payload is the same code for every
//! provider.

use std::path::{Path, PathBuf};

use agentkit_manifest::ChannelKind;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// A webhook provider with a channel pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Github,
    Gitlab,
    Bitbucket,
}

impl Provider {
    pub fn kind(self) -> ChannelKind {
        match self {
            Provider::Github => ChannelKind::Github,
            Provider::Gitlab => ChannelKind::Gitlab,
            Provider::Bitbucket => ChannelKind::Bitbucket,
        }
    }

    /// `GitHub`, `GitLab`, `Bitbucket`.
    pub fn label(self) -> &'static str {
        match self {
            Provider::Github => "GitHub",
            Provider::Gitlab => "GitLab",
            Provider::Bitbucket => "Bitbucket",
        }
    }

    /// `github`, `gitlab`, `bitbucket`: the `kind` value.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Github => "github",
            Provider::Gitlab => "gitlab",
            Provider::Bitbucket => "bitbucket",
        }
    }

    /// The environment variable a replay's secret defaults to.
    pub fn secret_var(self) -> &'static str {
        match self {
            Provider::Github => "GITHUB_WEBHOOK_SECRET",
            Provider::Gitlab => "GITLAB_WEBHOOK_SECRET",
            Provider::Bitbucket => "BITBUCKET_WEBHOOK_SECRET",
        }
    }

    /// The event a saved payload is, when the caller does not say.
    pub fn guess_event(self, p: &Value) -> String {
        let has = |k: &str| p.get(k).is_some();
        match self {
            Provider::Github => if has("comment") && has("issue") {
                "issue_comment"
            } else if has("pull_request") {
                "pull_request"
            } else if has("check_suite") {
                "check_suite"
            } else if has("zen") {
                "ping"
            } else if has("issue") {
                "issues"
            } else {
                "push"
            }
            .to_owned(),
            Provider::Gitlab => p
                .get("object_kind")
                .and_then(Value::as_str)
                .unwrap_or("push")
                .to_owned(),
            Provider::Bitbucket => match p.get("eventKey").and_then(Value::as_str) {
                Some(k) => k.to_owned(),
                None if has("comment") && has("pullrequest") => {
                    "pullrequest:comment_created".into()
                }
                None if has("pullrequest") => "pullrequest:created".into(),
                None => "repo:push".into(),
            },
        }
    }
}

/// One pack channel of a discovered host.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackTarget {
    pub slug: String,
    pub channel: String,
    /// The path on the host: `/<slug>/v1/channels/<id>`.
    pub path: String,
    /// The webhook events the channel publishes.
    pub events: Vec<String>,
}

/// Every channel of `provider`'s kind under `dir`.
pub fn pack_targets(dir: &Path, provider: Provider) -> Result<Vec<PackTarget>> {
    let found = agentkit_manifest::discover(dir)?;
    if found.diagnostics.has_errors() {
        return Err(Error::Invalid {
            diagnostics: found.diagnostics,
        });
    }
    let mut out = Vec::new();
    for project in &found.host.agents {
        for c in &project.agent.channels {
            if c.kind != provider.kind() {
                continue;
            }
            let events = match provider {
                Provider::Github => agentkit_channels::github_events(c),
                Provider::Gitlab => agentkit_channels::gitlab_events(c),
                Provider::Bitbucket => agentkit_channels::bitbucket_events(c),
            }
            .map_err(|e| Error::Config {
                message: e.to_string(),
            })?;
            out.push(PackTarget {
                slug: project.slug.clone(),
                channel: c.id.clone(),
                path: format!("/{}/v1/channels/{}", project.slug, c.id),
                events,
            });
        }
    }
    Ok(out)
}

/// The `X-Gitlab-Event` header of an `object_kind`.
fn gitlab_header(event: &str) -> String {
    match event {
        "merge_request" => "Merge Request Hook".into(),
        "note" => "Note Hook".into(),
        "pipeline" => "Pipeline Hook".into(),
        "push" => "Push Hook".into(),
        "tag_push" => "Tag Push Hook".into(),
        "issue" => "Issue Hook".into(),
        "build" => "Job Hook".into(),
        "wiki_page" => "Wiki Page Hook".into(),
        "deployment" => "Deployment Hook".into(),
        "release" => "Release Hook".into(),
        other => other.into(),
    }
}

/// POSTs one delivery with `provider`'s headers, signed (or with the
/// shared token) when `secret` is set; the status and JSON answer.
pub async fn post_delivery(
    client: &reqwest::Client,
    provider: Provider,
    url: &str,
    event: &str,
    delivery: &str,
    body: &[u8],
    secret: Option<&str>,
) -> Result<(u16, Value)> {
    let mut req = client.post(url).header("content-type", "application/json");
    req = match provider {
        Provider::Github => {
            let mut r = req
                .header("x-github-event", event)
                .header("x-github-delivery", delivery);
            if let Some(s) = secret {
                r = r.header(
                    "x-hub-signature-256",
                    format!("sha256={}", agentkit_channels::sign(s, body)),
                );
            }
            r
        }
        Provider::Gitlab => {
            let mut r = req
                .header("x-gitlab-event", gitlab_header(event))
                .header("x-gitlab-event-uuid", delivery);
            if let Some(s) = secret {
                r = r.header("x-gitlab-token", s);
            }
            r
        }
        Provider::Bitbucket => {
            let mut r = req
                .header("x-event-key", event)
                .header("x-request-uuid", delivery);
            if let Some(s) = secret {
                r = r.header(
                    "x-hub-signature",
                    format!("sha256={}", agentkit_channels::sign(s, body)),
                );
            }
            r
        }
    };
    let resp = req
        .body(body.to_vec())
        .send()
        .await
        .map_err(|e| Error::Config {
            message: format!(
                "cannot POST to {}: {}",
                agentkit_harness::redact_credentials(url),
                agentkit_harness::http_error_text(e)
            ),
        })?;
    let status = resp.status().as_u16();
    Ok((status, resp.json().await.unwrap_or(Value::Null)))
}

/// A saved payload replayed at every matching channel of a provider.
#[derive(Debug, Clone)]
pub struct PayloadReplay {
    pub provider: Provider,
    pub dir: PathBuf,
    /// The server (default `http://127.0.0.1:3000`).
    pub url: Option<String>,
    pub payload: PathBuf,
    /// The event; guessed from the payload when `None`.
    pub event: Option<String>,
    pub secret: Option<String>,
    /// Only this channel (or agent slug).
    pub channel: Option<String>,
}

/// One replayed delivery: the event, its id, the URL, the answer.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Posted {
    pub event: String,
    pub delivery: String,
    pub url: String,
    pub status: u16,
    pub response: Value,
}

/// POSTs the saved payload's bytes, unchanged, at each channel of the
/// provider that publishes its event (or `*`).
pub async fn replay_payload(r: &PayloadReplay) -> Result<Vec<Posted>> {
    let mut targets = pack_targets(&r.dir, r.provider)?;
    if let Some(c) = &r.channel {
        targets.retain(|t| &t.channel == c || &t.slug == c);
    }
    if targets.is_empty() {
        return Err(Error::Config {
            message: format!(
                "no `kind = \"{}\"` channel under `{}`",
                r.provider.name(),
                r.dir.display()
            ),
        });
    }
    let body = std::fs::read(&r.payload).map_err(|e| Error::Config {
        message: format!("cannot read `{}`: {e}", r.payload.display()),
    })?;
    let parsed: Value = serde_json::from_slice(&body).map_err(|e| Error::Config {
        message: format!("`{}` is not JSON: {e}", r.payload.display()),
    })?;
    let event = r
        .event
        .clone()
        .unwrap_or_else(|| r.provider.guess_event(&parsed));
    let base = r
        .url
        .clone()
        .unwrap_or_else(|| "http://127.0.0.1:3000".into());
    let client = http_client()?;
    let mut out = Vec::new();
    for t in &targets {
        let url = format!("{}{}", base.trim_end_matches('/'), t.path);
        let delivery = format!("replay-{}", unique());
        let (status, response) = post_delivery(
            client,
            r.provider,
            &url,
            &event,
            &delivery,
            &body,
            r.secret.as_deref(),
        )
        .await?;
        out.push(Posted {
            event: event.clone(),
            delivery,
            url,
            status,
            response,
        });
    }
    Ok(out)
}

/// The process's one HTTP client (the harness's).
pub(crate) fn http_client() -> Result<&'static reqwest::Client> {
    agentkit_harness::http_client().map_err(|e| Error::Config {
        message: e.to_string(),
    })
}

/// A delivery id no earlier replay used.
pub(crate) fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{t:x}-{}", N.fetch_add(1, Ordering::Relaxed))
}
