//! A small GitHub REST client for the pack's progress surfaces: commit
//! statuses, the sticky banner comment, and reading a pull request. The
//! base URL is configurable (GitHub Enterprise Server, or a mock in tests).

use serde_json::{Value, json};

use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub(crate) struct GithubApi {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl GithubApi {
    pub(crate) fn new(base: &str, token: Option<String>) -> GithubApi {
        GithubApi {
            client: crate::deliver::http_client(),
            base: base.trim_end_matches('/').to_owned(),
            token,
        }
    }

    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut req = self
            .client
            .request(method.clone(), &url)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28");
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|e| Error::Upstream {
            message: format!("GitHub API {method} {path}: {e}"),
        })?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(Error::Upstream {
                message: format!(
                    "GitHub API {method} {path}: HTTP {}: {}",
                    status.as_u16(),
                    text.chars().take(200).collect::<String>()
                ),
            });
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
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
