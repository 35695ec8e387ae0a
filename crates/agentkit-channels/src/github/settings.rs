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
    /// GitHub App credentials: not available yet.
    #[serde(default)]
    pub(crate) app_id: Option<Value>,
    #[serde(default)]
    pub(crate) private_key: Option<String>,
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
        if s.app_id.is_some() || s.private_key.is_some() || s.installation_id.is_some() {
            return Err("GitHub App installation tokens (`app_id`, `private_key`, `installation_id`) are not available yet; set `token` (or GITHUB_TOKEN) instead".into());
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
        assert!(
            Settings::parse(&json!({"app_id": 1}))
                .unwrap_err()
                .contains("not available yet")
        );
    }
}
