//! A small GitHub REST client for the pack's progress surfaces: commit
//! statuses, the sticky banner comment, and reading a pull request. The
//! base URL is configurable (GitHub Enterprise Server, or a mock in tests).
//! It authenticates with a token (`token`, `GITHUB_TOKEN`) or as a GitHub
//! App installation ([`super::app`]).

use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};

use super::app::AppAuth;
use crate::error::{Error, Result};

/// How the client authenticates.
#[derive(Clone, Default)]
pub(crate) enum Auth {
    #[default]
    None,
    /// A personal access token or `GITHUB_TOKEN`, sent as a bearer token.
    Token(String),
    /// GitHub App installation tokens, minted and cached per installation.
    App(Arc<AppAuth>),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Token(_) => f.write_str("Token(<redacted>)"),
            Auth::App(app) => f.debug_tuple("App").field(app).finish(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct GithubApi {
    base: String,
    auth: Auth,
    /// The App installation this client acts as (the settings' fixed
    /// one, or a delivery's `installation.id`).
    installation: Option<u64>,
}

impl GithubApi {
    pub(crate) fn new(base: &str, auth: Auth) -> GithubApi {
        let installation = match &auth {
            Auth::App(app) => app.installation_id,
            _ => None,
        };
        GithubApi {
            base: base.trim_end_matches('/').to_owned(),
            auth,
            installation,
        }
    }

    /// This client acting as `installation` when the settings fix none
    /// (a delivery's `installation.id`).
    pub(crate) fn for_installation(&self, installation: Option<u64>) -> GithubApi {
        let mut api = self.clone();
        if api.installation.is_none() {
            api.installation = installation;
        }
        api
    }

    /// Are there credentials to call the API with?
    pub(crate) fn has_credentials(&self) -> bool {
        !matches!(self.auth, Auth::None)
    }

    /// The `Authorization` header value, and the App token it carries
    /// (to forget on a 401).
    async fn authorization(&self) -> Result<Option<(String, Option<(u64, String)>)>> {
        match &self.auth {
            Auth::None => Ok(None),
            Auth::Token(t) => Ok(Some((format!("Bearer {t}"), None))),
            Auth::App(app) => {
                let Some(installation) = self.installation else {
                    return Err(Error::Upstream {
                        message: "GitHub App credentials are set but no installation is known: set `installation_id`, or let deliveries carry `installation.id` (App webhooks do)".into(),
                    });
                };
                let token = app.token(&self.base, installation).await?;
                Ok(Some((
                    format!("token {token}"),
                    Some((installation, token)),
                )))
            }
        }
    }

    /// One authenticated call; `path` starts with `/`. An App token that
    /// GitHub refuses with 401 is forgotten and the call retried once with
    /// a fresh one.
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut retried = false;
        loop {
            let mut req = crate::deliver::request(method.clone(), &url)?
                .header("accept", "application/vnd.github+json")
                .header("x-github-api-version", "2022-11-28");
            let auth = self.authorization().await?;
            if let Some((header, _)) = &auth {
                req = req.header("authorization", header);
            }
            if let Some(b) = &body {
                req = req.json(b);
            }
            let resp = req.send().await.map_err(|e| Error::Upstream {
                message: format!(
                    "GitHub API {method} {path}: {}",
                    agentkit_plumbing::http_error_text(e)
                ),
            })?;
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            if status.as_u16() == 401
                && !retried
                && let (Auth::App(app), Some((_, Some((installation, token))))) =
                    (&self.auth, &auth)
            {
                app.forget(*installation, token).await;
                retried = true;
                continue;
            }
            if !status.is_success() {
                return Err(Error::Upstream {
                    message: format!(
                        "GitHub API {method} {path}: HTTP {}: {}",
                        status.as_u16(),
                        text.chars().take(200).collect::<String>()
                    ),
                });
            }
            return Ok(serde_json::from_str(&text).unwrap_or(Value::Null));
        }
    }

    /// `POST /repos/{repo}/statuses/{sha}`.
    pub(crate) async fn set_status(
        &self,
        repo: &str,
        sha: &str,
        state: &str,
        context: &str,
        description: &str,
    ) -> Result<()> {
        let description: String = description.chars().take(140).collect();
        self.call(
            reqwest::Method::POST,
            &format!("/repos/{repo}/statuses/{sha}"),
            Some(json!({"state": state, "context": context, "description": description})),
        )
        .await
        .map(|_| ())
    }

    /// `POST /repos/{repo}/issues/{n}/comments`; the new comment's id.
    pub(crate) async fn create_comment(&self, repo: &str, number: u64, body: &str) -> Result<u64> {
        let v = self
            .call(
                reqwest::Method::POST,
                &format!("/repos/{repo}/issues/{number}/comments"),
                Some(json!({"body": body})),
            )
            .await?;
        v.get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| Error::Upstream {
                message: "GitHub API: the created comment has no id".into(),
            })
    }

    /// `PATCH /repos/{repo}/issues/comments/{id}`.
    pub(crate) async fn update_comment(&self, repo: &str, id: u64, body: &str) -> Result<()> {
        self.call(
            reqwest::Method::PATCH,
            &format!("/repos/{repo}/issues/comments/{id}"),
            Some(json!({"body": body})),
        )
        .await
        .map(|_| ())
    }

    /// `GET /repos/{repo}/pulls/{n}`.
    pub(crate) async fn pull(&self, repo: &str, number: u64) -> Result<Value> {
        self.call(
            reqwest::Method::GET,
            &format!("/repos/{repo}/pulls/{number}"),
            None,
        )
        .await
    }
}

/// `host.github`: authenticated GitHub REST access with a channel's
/// credentials (a token, or a GitHub App installation), for Rust tools,
/// channel handlers and the host bridge. Cheap to clone; never shows its
/// credentials in `Debug`.
#[derive(Debug, Clone)]
pub struct GithubClient {
    api: GithubApi,
}

impl GithubClient {
    /// A client for `api_url` (`https://api.github.com`, or
    /// `https://HOST/api/v3`) with a token.
    pub fn with_token(api_url: &str, token: impl Into<String>) -> GithubClient {
        GithubClient {
            api: GithubApi::new(api_url, Auth::Token(token.into())),
        }
    }

    pub(crate) fn from_api(api: GithubApi) -> GithubClient {
        GithubClient { api }
    }

    /// The same credentials acting as App installation `id` (App
    /// credentials without a fixed `installation_id` need one; a token
    /// ignores it).
    pub fn for_installation(&self, id: u64) -> GithubClient {
        GithubClient {
            api: self.api.for_installation(Some(id)),
        }
    }

    /// Does the client have credentials (a token or App credentials)?
    pub fn has_credentials(&self) -> bool {
        self.api.has_credentials()
    }

    /// `method path` with an optional JSON body; the JSON answer (`null`
    /// when empty). `path` is relative to the API base and starts with
    /// `/` (`/repos/o/r/issues/1/comments`). A non-2xx answer is
    /// [`Error::Upstream`] with its status and the start of its body.
    pub async fn request(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        if !path.starts_with('/') || path.starts_with("//") || path.contains("://") {
            return Err(Error::bad_request(format!(
                "the GitHub API path must start with a single `/` (such as `/repos/OWNER/REPO`), not `{path}`"
            )));
        }
        let method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
            .map_err(|_| Error::bad_request(format!("`{method}` is not an HTTP method")))?;
        self.api.call(method, path, body).await
    }

    /// Comments on issue or pull request `number` of `repo` (`owner/name`);
    /// the comment's id.
    pub async fn create_comment(&self, repo: &str, number: u64, body: &str) -> Result<u64> {
        self.api.create_comment(repo, number, body).await
    }

    /// Sets commit status `state` (`pending`, `success`, `failure`,
    /// `error`) under `context` on `sha` of `repo`.
    pub async fn set_status(
        &self,
        repo: &str,
        sha: &str,
        state: &str,
        context: &str,
        description: &str,
    ) -> Result<()> {
        self.api
            .set_status(repo, sha, state, context, description)
            .await
    }
}
