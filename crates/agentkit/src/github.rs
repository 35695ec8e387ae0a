//! `agentkit github`: the GitHub channels of a project (URL and events),
//! replaying saved or synthesised deliveries at them, signed like GitHub
//! signs, and forwarding live deliveries through `gh webhook forward`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::webhooks::{PackTarget, Provider, pack_targets, post_delivery};

/// One GitHub channel of a discovered host.
pub type GithubTarget = PackTarget;

/// Every `kind = "github"` channel under `dir`.
pub fn github_targets(dir: &Path) -> Result<Vec<GithubTarget>> {
    pack_targets(dir, Provider::Github)
}

/// What to replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    pub dir: PathBuf,
    /// The server (default `http://127.0.0.1:3000`).
    pub url: Option<String>,
    /// A saved payload; otherwise `pr` is read through the API.
    pub payload: Option<PathBuf>,
    /// `https://github.com/o/r/pull/N` or `o/r#N`.
    pub pr: Option<String>,
    /// Event names, or `*` for the channel's declared events; default
    /// `pull_request` (or, for `--payload`, guessed from the payload).
    pub events: Option<String>,
    pub action: Option<String>,
    pub conclusion: Option<String>,
    pub comment: Option<String>,
    /// The `context` of `status` deliveries (default `ci`); alone, it
    /// makes `status` the default event.
    pub context: Option<String>,
    /// Signs deliveries (`X-Hub-Signature-256`).
    pub secret: Option<String>,
    /// Only one channel of several.
    pub channel: Option<String>,
    /// Write the payloads to `out` instead of POSTing them.
    pub dry_run: bool,
    pub out: Option<PathBuf>,
    /// The REST API base for `pr` (default `https://api.github.com`).
    pub api_url: Option<String>,
    pub token: Option<String>,
}

/// One replayed delivery.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayOutcome {
    pub event: String,
    pub delivery: String,
    pub url: String,
    /// `None` in a dry run.
    pub status: Option<u16>,
    pub response: Value,
    /// Where the payload was written (`--out`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// `o/r#N` or a pull request URL → (`o/r`, N).
pub fn parse_pr(s: &str) -> Option<(String, u64)> {
    let s = s.trim().trim_end_matches('/');
    if let Some((repo, n)) = s.split_once('#') {
        return Some((repo.to_owned(), n.parse().ok()?));
    }
    let parts: Vec<&str> = s.split('/').collect();
    let i = parts.iter().rposition(|p| *p == "pull")?;
    if i < 2 {
        return None;
    }
    Some((
        format!("{}/{}", parts[i - 2], parts[i - 1]),
        parts.get(i + 1)?.parse().ok()?,
    ))
}

async fn read_pr(options: &ReplayOptions, repo: &str, n: u64) -> Result<Value> {
    let base = options
        .api_url
        .clone()
        .unwrap_or_else(|| "https://api.github.com".into());
    let mut req = crate::webhooks::http_client()?
        .get(format!(
            "{}/repos/{repo}/pulls/{n}",
            base.trim_end_matches('/')
        ))
        .header("accept", "application/vnd.github+json")
        .header("user-agent", "agentkit");
    if let Some(t) = &options.token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| Error::Config {
        message: format!(
            "cannot read {repo}#{n}: {}",
            agentkit_harness::http_error_text(e)
        ),
    })?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        return Err(Error::Config {
            message: format!(
                "cannot read {repo}#{n}: HTTP {} {}",
                status.as_u16(),
                body.get("message").and_then(Value::as_str).unwrap_or("")
            ),
        });
    }
    Ok(body)
}

/// A GitHub-shaped payload for `event` about pull request `pr`.
fn synthesise(event: &str, pr: &Value, options: &ReplayOptions) -> Option<Value> {
    let repository = pr.pointer("/base/repo").cloned().unwrap_or(Value::Null);
    let sender = pr.get("user").cloned().unwrap_or(Value::Null);
    let number = pr.get("number").cloned().unwrap_or(Value::Null);
    Some(match event {
        "pull_request" => json!({
            "action": options.action.clone().unwrap_or_else(|| "opened".into()),
            "number": number, "pull_request": pr, "repository": repository, "sender": sender,
        }),
        "issue_comment" => json!({
            "action": "created",
            "issue": {"number": number, "title": pr.get("title"), "html_url": pr.get("html_url"), "pull_request": {"url": pr.get("url")}, "user": sender},
            "comment": {"body": options.comment.clone().unwrap_or_else(|| "Please take another look.".into()), "user": sender},
            "repository": repository, "sender": sender,
        }),
        "check_suite" => json!({
            "action": "completed",
            "check_suite": {"head_sha": pr.pointer("/head/sha"), "head_branch": pr.pointer("/head/ref"), "conclusion": options.conclusion.clone().unwrap_or_else(|| "success".into()), "status": "completed", "pull_requests": [{"number": number}]},
            "repository": repository, "sender": sender,
        }),
        "status" => {
            // A commit status on the head commit: `--context` names it,
            // `--conclusion` gives its state (a check conclusion other
            // than success / failure / error / pending reads as failure).
            let state = match options.conclusion.as_deref().unwrap_or("success") {
                s @ ("success" | "failure" | "error" | "pending") => s.to_owned(),
                _ => "failure".to_owned(),
            };
            let context = options.context.clone().unwrap_or_else(|| "ci".into());
            json!({
                "sha": pr.pointer("/head/sha"),
                "name": repository.get("full_name"),
                "context": context,
                "state": state,
                "description": format!("{context}: {state}"),
                "target_url": pr.get("html_url"),
                "commit": {"sha": pr.pointer("/head/sha")},
                "branches": [{"name": pr.pointer("/head/ref"), "commit": {"sha": pr.pointer("/head/sha")}}],
                "repository": repository, "sender": sender,
            })
        }
        _ => return None,
    })
}

/// Builds the payloads, signs them, and POSTs each at every matching
/// GitHub channel under `options.dir` (or writes them to `options.out`).
pub async fn replay(options: &ReplayOptions) -> Result<Vec<ReplayOutcome>> {
    let mut targets = github_targets(&options.dir)?;
    if let Some(c) = &options.channel {
        targets.retain(|t| &t.channel == c || &t.slug == c);
    }
    if targets.is_empty() {
        return Err(Error::Config {
            message: format!(
                "no `kind = \"github\"` channel under `{}`",
                options.dir.display()
            ),
        });
    }
    let mut payloads: Vec<(String, Value)> = Vec::new();
    if let Some(file) = &options.payload {
        let text = std::fs::read_to_string(file).map_err(|e| Error::Config {
            message: format!("cannot read `{}`: {e}", file.display()),
        })?;
        let mut p: Value = serde_json::from_str(&text).map_err(|e| Error::Config {
            message: format!("`{}` is not JSON: {e}", file.display()),
        })?;
        if let (Some(a), Some(obj)) = (&options.action, p.as_object_mut()) {
            obj.insert("action".into(), json!(a));
        }
        let event = options
            .events
            .clone()
            .filter(|e| e != "*")
            .unwrap_or_else(|| Provider::Github.guess_event(&p));
        payloads.push((event, p));
    } else if let Some(pr) = &options.pr {
        let (repo, n) = parse_pr(pr).ok_or_else(|| Error::Config {
            message: format!("`{pr}` is not a pull request (https://github.com/OWNER/REPO/pull/N or OWNER/REPO#N)"),
        })?;
        let data = read_pr(options, &repo, n).await?;
        let events: Vec<String> = match options.events.as_deref() {
            None if options.context.is_some() => vec!["status".into()],
            None => vec!["pull_request".into()],
            Some("*") => {
                let mut all: Vec<String> = targets
                    .iter()
                    .flat_map(|t| t.events.clone())
                    .filter(|e| e != "*")
                    .collect();
                all.dedup();
                all
            }
            Some(list) => list
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
        };
        for e in events {
            match synthesise(&e, &data, options) {
                Some(p) => payloads.push((e, p)),
                None => {
                    tracing::warn!(event = %e, "cannot synthesise this event; only pull_request, issue_comment, check_suite and status are")
                }
            }
        }
    } else {
        return Err(Error::Config {
            message: "give a pull request (URL or OWNER/REPO#N) or --payload FILE".into(),
        });
    }
    let base = options
        .url
        .clone()
        .unwrap_or_else(|| "http://127.0.0.1:3000".into());
    let client = crate::webhooks::http_client()?;
    let mut out = Vec::new();
    for (i, (event, payload)) in payloads.iter().enumerate() {
        let body = serde_json::to_vec_pretty(payload).unwrap_or_default();
        let action = payload.get("action").and_then(Value::as_str).unwrap_or("");
        if options.dry_run {
            let file = match &options.out {
                Some(dir) => {
                    std::fs::create_dir_all(dir).map_err(|e| Error::Config {
                        message: format!("cannot create `{}`: {e}", dir.display()),
                    })?;
                    let name = if action.is_empty() {
                        format!("{event}.json")
                    } else {
                        format!("{event}.{action}.json")
                    };
                    let path = dir.join(name);
                    std::fs::write(&path, &body).map_err(|e| Error::Config {
                        message: format!("cannot write `{}`: {e}", path.display()),
                    })?;
                    Some(path.display().to_string())
                }
                None => None,
            };
            out.push(ReplayOutcome {
                event: event.clone(),
                delivery: String::new(),
                url: String::new(),
                status: None,
                response: payload.clone(),
                file,
            });
            continue;
        }
        for t in &targets {
            if !t.events.iter().any(|e| e == "*" || e == event) {
                continue;
            }
            let delivery = format!("replay-{}-{i}", crate::webhooks::unique());
            let url = format!("{}{}", base.trim_end_matches('/'), t.path);
            let (status, response) = post_delivery(
                client,
                Provider::Github,
                &url,
                event,
                &delivery,
                &body,
                options.secret.as_deref(),
            )
            .await?;
            out.push(ReplayOutcome {
                event: event.clone(),
                delivery,
                url,
                status: Some(status),
                response,
                file: None,
            });
        }
    }
    Ok(out)
}

/// Whose deliveries `forward` subscribes to: one repository's, or every
/// repository's of an organisation (`gh webhook forward --repo | --org`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardScope {
    /// `OWNER/REPO`.
    Repo(String),
    /// An organisation's login.
    Org(String),
}

/// What `forward` runs: the repository or organisation, the events to
/// subscribe to (the union of the matching channels' events, `*` when any
/// takes every event, or the ones asked for), and the channels' webhook
/// URLs on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardPlan {
    pub scope: ForwardScope,
    pub events: String,
    pub targets: Vec<String>,
    pub secret: Option<String>,
}

impl ForwardPlan {
    /// `gh webhook forward` arguments delivering to `url`: the one
    /// channel's URL, or the local relay's when there are several.
    pub fn gh_args(&self, url: &str) -> Vec<String> {
        let mut args = vec![
            "webhook".to_owned(),
            "forward".to_owned(),
            match &self.scope {
                ForwardScope::Repo(r) => format!("--repo={r}"),
                ForwardScope::Org(o) => format!("--org={o}"),
            },
            format!("--events={}", self.events),
            format!("--url={url}"),
        ];
        if let Some(s) = &self.secret {
            args.push(format!("--secret={s}"));
        }
        args
    }
}

/// Which channels `forward` delivers to and what it subscribes to.
#[derive(Debug, Clone, Default)]
pub struct ForwardRequest<'a> {
    /// The server (default `http://127.0.0.1:3000`).
    pub url: Option<&'a str>,
    /// Only this channel (by id, or agent slug).
    pub channel: Option<&'a str>,
    /// Only the channels of this agent.
    pub slug: Option<&'a str>,
    /// Subscribe to these events only (comma-separated); each must be one
    /// a matching channel publishes. Default: the channels' events.
    pub events: Option<&'a str>,
    pub secret: Option<&'a str>,
}

/// The GitHub channels of `dir` that `forward` delivers to, narrowed by
/// `req`, and the subscription for `scope`.
pub fn forward_plan(
    dir: &Path,
    scope: ForwardScope,
    req: &ForwardRequest<'_>,
) -> Result<ForwardPlan> {
    let mut targets = github_targets(dir)?;
    if let Some(c) = req.channel {
        targets.retain(|t| t.channel == c || t.slug == c);
    }
    if let Some(slug) = req.slug {
        targets.retain(|t| t.slug == slug);
    }
    if targets.is_empty() {
        return Err(Error::Config {
            message: match req.slug {
                Some(slug) => format!(
                    "no `kind = \"github\"` channel of agent `{slug}` under `{}`",
                    dir.display()
                ),
                None => format!("no `kind = \"github\"` channel under `{}`", dir.display()),
            },
        });
    }
    let takes = |t: &GithubTarget, e: &str| t.events.iter().any(|x| x == "*" || x == e);
    let events = match req
        .events
        .map(str::trim)
        .filter(|e| !e.is_empty() && *e != "*")
    {
        Some(list) => {
            let asked: Vec<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .collect();
            if let Some(e) = asked.iter().find(|e| !targets.iter().any(|t| takes(t, e))) {
                return Err(Error::Config {
                    message: format!(
                        "no matching channel publishes `{e}` (see `agentkit github events`)"
                    ),
                });
            }
            targets.retain(|t| asked.iter().any(|e| takes(t, e)));
            asked.join(",")
        }
        None => {
            let mut events: Vec<String> = Vec::new();
            let mut every = false;
            for t in &targets {
                let named: Vec<&String> = t.events.iter().filter(|e| *e != "*").collect();
                if named.is_empty() {
                    every = true;
                }
                for e in named {
                    if !events.contains(e) {
                        events.push(e.clone());
                    }
                }
            }
            if every || events.is_empty() {
                "*".to_owned()
            } else {
                events.join(",")
            }
        }
    };
    let base = req
        .url
        .unwrap_or("http://127.0.0.1:3000")
        .trim_end_matches('/');
    Ok(ForwardPlan {
        scope,
        events,
        targets: targets
            .iter()
            .map(|t| format!("{base}{}", t.path))
            .collect(),
        secret: req.secret.map(str::to_owned),
    })
}

/// Headers a relayed delivery keeps: GitHub's own and the signature
/// (the relay does not re-sign: every channel must share the secret).
fn relayed(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("x-github-")
        || n.starts_with("x-hub-signature")
        || n == "content-type"
        || n == "user-agent"
}

/// How long the relay waits for one target's answer.
const RELAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts the local fan-out relay `forward` points `gh webhook forward`
/// at when several channels match: each delivery is POSTed unchanged (raw
/// body, GitHub headers, signature) to every target; the relay answers
/// `200` when every target accepted it and `502` otherwise, with each
/// target's status. Returns the relay's URL; it serves until `stop`.
pub async fn start_relay(
    targets: Vec<String>,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let client = agentkit_harness::http_client().map_err(std::io::Error::other)?;
    let targets = std::sync::Arc::new(targets);
    let app = axum::Router::new().fallback(
        move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let (client, targets) = (client.clone(), targets.clone());
            async move {
                let mut answers = Vec::new();
                let mut ok = true;
                for target in targets.iter() {
                    let mut req = client
                        .post(target)
                        .timeout(RELAY_TIMEOUT)
                        .body(body.clone());
                    for (k, v) in &headers {
                        if relayed(k.as_str()) {
                            req = req.header(k.as_str(), v.as_bytes());
                        }
                    }
                    let status = match req.send().await {
                        Ok(r) => {
                            ok &= r.status().as_u16() < 400;
                            json!(r.status().as_u16())
                        }
                        Err(e) => {
                            ok = false;
                            let error = agentkit_harness::http_error_text(e);
                            let target = agentkit_harness::redact_credentials(target);
                            tracing::warn!(%target, %error, "relayed delivery not delivered");
                            json!(null)
                        }
                    };
                    answers.push(json!({"url": target, "status": status}));
                }
                let code = if ok {
                    axum::http::StatusCode::OK
                } else {
                    axum::http::StatusCode::BAD_GATEWAY
                };
                (code, axum::Json(json!({"ok": ok, "targets": answers})))
            }
        },
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_request_references_parse() {
        assert_eq!(
            parse_pr("https://github.com/o/r/pull/12"),
            Some(("o/r".into(), 12))
        );
        assert_eq!(parse_pr("o/r#3"), Some(("o/r".into(), 3)));
        assert_eq!(parse_pr("o/r"), None);
    }
}
