//! The settings of a `kind = "github"` channel file, checked when the
//! channel is mounted (unknown keys are errors, like everywhere else).

use serde::Deserialize;
use serde_json::Value;

use crate::pack::{Rule, check_rules, published_events};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Verifies `X-Hub-Signature-256`; usually `${GITHUB_WEBHOOK_SECRET}`.
    #[serde(default)]
    pub(crate) webhook_secret: Option<String>,
    /// `https://api.github.com` (default) or `https://HOST/api/v3`.
    #[serde(default)]
    pub(crate) api_url: Option<String>,
    /// An API token; defaults to `${GITHUB_TOKEN}`, then `${GH_TOKEN}`.
    #[serde(default)]
    pub(crate) token: Option<String>,
    /// GitHub App credentials: the App id (a number, or `${VAR}`) and
    /// its PEM private key, inline (`${VAR}`) or in a file
    /// (`private_key_path`, relative to the agent folder). Installation
    /// tokens replace `token`.
    #[serde(default)]
    pub(crate) app_id: Option<Value>,
    #[serde(default)]
    pub(crate) private_key: Option<String>,
    #[serde(default)]
    pub(crate) private_key_path: Option<String>,
    /// The installation to act as; otherwise each delivery's
    /// `installation.id`.
    #[serde(default)]
    pub(crate) installation_id: Option<Value>,
    /// The bot's login: its own comments never start a turn.
    #[serde(default)]
    pub(crate) bot_name: Option<String>,
    /// The webhook events the channel publishes (defaults to the rules').
    #[serde(default)]
    pub(crate) events: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) progress: Progress,
    #[serde(default)]
    pub(crate) rules: Vec<Rule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Progress {
    /// `true` or `{ context = "…" }`: a commit status following the turn.
    #[serde(default)]
    pub(crate) commit_status: Option<Toggle>,
    /// `true`: one sticky PR comment edited as the turn progresses.
    #[serde(default)]
    pub(crate) banner: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Toggle {
    On(bool),
    With {
        #[serde(default)]
        context: Option<String>,
    },
}

impl Progress {
    /// The status context, when commit statuses are on.
    pub(crate) fn status_context(&self) -> Option<String> {
        match &self.commit_status {
            None | Some(Toggle::On(false)) => None,
            Some(Toggle::On(true)) | Some(Toggle::With { context: None }) => {
                Some("agentkit".into())
            }
            Some(Toggle::With { context: Some(c) }) => Some(c.clone()),
        }
    }
}

impl Settings {
    pub(crate) fn parse(value: &Value) -> Result<Settings, String> {
        let s: Settings = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        check_rules(&s.rules)?;
        let key = s.private_key.is_some() || s.private_key_path.is_some();
        if s.private_key.is_some() && s.private_key_path.is_some() {
            return Err("set one of `private_key` and `private_key_path`, not both".into());
        }
        if s.app_id.is_some() != key {
            return Err(if key {
                "GitHub App credentials are half set: `private_key` needs `app_id`".into()
            } else {
                "GitHub App credentials are half set: `app_id` needs `private_key` (PEM, usually `${GITHUB_APP_PRIVATE_KEY}`) or `private_key_path`".into()
            });
        }
        if s.installation_id.is_some() && s.app_id.is_none() {
            return Err(
                "`installation_id` needs GitHub App credentials (`app_id` and `private_key`)"
                    .into(),
            );
        }
        if s.app_id.is_some() && s.token.is_some() {
            return Err(
                "set either `token` or GitHub App credentials (`app_id`, `private_key`), not both"
                    .into(),
            );
        }
        for (name, v) in [
            ("app_id", &s.app_id),
            ("installation_id", &s.installation_id),
        ] {
            if let Some(v) = v
                && !(v.is_u64() || v.is_string())
            {
                return Err(format!("`{name}` must be a number or a string, not {v}"));
            }
        }
        Ok(s)
    }

    /// The events the channel dispatches on.
    pub(crate) fn published_events(&self) -> Vec<String> {
        published_events(self.events.as_ref(), &self.rules)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_need_one_outcome_and_match_event_action_and_conditions() {
        let s = Settings::parse(&json!({"rules": [
            {"event": "pull_request", "actions": ["opened"], "when": {"pull_request.draft": false}, "turn": {}},
            {"event": "*", "skip": true}
        ]}))
        .unwrap();
        let pr = json!({"action": "opened", "pull_request": {"draft": false}});
        assert!(s.rules[0].matches_with(&["pull_request"], "opened", &pr));
        assert!(!s.rules[0].matches_with(
            &["pull_request"],
            "opened",
            &json!({"action": "opened", "pull_request": {"draft": true}})
        ));
        assert!(!s.rules[0].matches_with(&["issues"], "opened", &pr));
        assert_eq!(s.published_events(), ["pull_request", "*"]);
        assert!(Settings::parse(&json!({"rules": [{"event": "x"}]})).is_err());
        assert!(Settings::parse(&json!({"bogus": 1})).is_err());
        let half = |v: Value| Settings::parse(&v).unwrap_err();
        assert!(half(json!({"app_id": 1})).contains("half set"));
        assert!(half(json!({"private_key": "${K}"})).contains("half set"));
        assert!(half(json!({"installation_id": 3})).contains("needs GitHub App"));
        assert!(
            half(json!({"app_id": 1, "private_key": "k", "private_key_path": "p"}))
                .contains("not both")
        );
        assert!(half(json!({"app_id": 1, "private_key": "k", "token": "t"})).contains("not both"));
        assert!(half(json!({"app_id": [1], "private_key": "k"})).contains("number or a string"));
        assert!(
            Settings::parse(
                &json!({"app_id": "${APP}", "private_key_path": "k.pem", "installation_id": 7})
            )
            .is_ok()
        );
    }
}
