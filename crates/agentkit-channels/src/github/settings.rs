//! The settings of a `kind = "github"` channel file, checked when the
//! channel is mounted (unknown keys are errors, like everywhere else).

use std::collections::BTreeMap;

use agentkit_manifest::Admission;
use serde::Deserialize;
use serde_json::Value;

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

/// One dispatch rule; the first rule that matches a delivery decides.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rule {
    /// The `X-GitHub-Event` (`pull_request`, `issue_comment`, …) or `*`.
    pub(crate) event: String,
    /// The payload's `action`s that match (any when empty).
    #[serde(default)]
    pub(crate) actions: Vec<String>,
    /// Dotted payload paths and the values they must equal.
    #[serde(default)]
    pub(crate) when: BTreeMap<String, Value>,
    #[serde(default)]
    pub(crate) turn: Option<TurnRule>,
    #[serde(default)]
    pub(crate) task: Option<TaskRule>,
    #[serde(default)]
    pub(crate) skip: bool,
}

/// A model turn, as the actor.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnRule {
    /// Template over the payload (plus `event`, `delivery`).
    #[serde(default)]
    pub(crate) message: Option<String>,
    /// Template; defaults to `pr:<owner/repo>#<n>` / `issue:<owner/repo>#<n>`.
    #[serde(default)]
    pub(crate) continuation: Option<String>,
    #[serde(default)]
    pub(crate) title: Option<String>,
    #[serde(default)]
    pub(crate) admission: Option<Admission>,
}

/// Host work, answered with 202 at once.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskRule {
    /// A program and its arguments, run in the agent folder with the
    /// payload on stdin.
    #[serde(default)]
    pub(crate) command: Option<Vec<String>>,
    /// Or a deterministic call of this server tool...
    #[serde(default)]
    pub(crate) tool: Option<String>,
    /// ...with this input (strings are templates over the payload).
    #[serde(default)]
    pub(crate) input: Option<Value>,
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
        if let Some(e) = &self.events {
            return e.clone();
        }
        let mut out: Vec<String> = Vec::new();
        for r in &self.rules {
            if !out.contains(&r.event) {
                out.push(r.event.clone());
            }
        }
        out
    }
}

/// Every rule has exactly one outcome, and its templates compile.
pub(crate) fn check_rules(rules: &[Rule]) -> Result<(), String> {
    for (i, r) in rules.iter().enumerate() {
        let n = [r.turn.is_some(), r.task.is_some(), r.skip]
            .iter()
            .filter(|b| **b)
            .count();
        if n != 1 {
            return Err(format!(
                "rules[{i}] (event `{}`) needs exactly one of `turn`, `task` or `skip = true`",
                r.event
            ));
        }
        if let Some(t) = &r.task
            && t.command.is_some() == t.tool.is_some()
        {
            return Err(format!(
                "rules[{i}].task needs exactly one of `command` or `tool`"
            ));
        }
        if let Some(t) = &r.task
            && t.command.as_ref().is_some_and(Vec::is_empty)
        {
            return Err(format!("rules[{i}].task.command is empty"));
        }
        for (field, t) in [
            ("message", r.turn.as_ref().and_then(|t| t.message.as_ref())),
            (
                "continuation",
                r.turn.as_ref().and_then(|t| t.continuation.as_ref()),
            ),
            ("title", r.turn.as_ref().and_then(|t| t.title.as_ref())),
        ] {
            if let Some(t) = t {
                agentkit_manifest::check_template(t)
                    .map_err(|e| format!("rules[{i}].turn.{field}: {e}"))?;
            }
        }
    }
    Ok(())
}

/// The value at a dotted path (`pull_request.head.sha`).
pub(crate) fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

impl Rule {
    pub(crate) fn matches(&self, event: &str, payload: &Value) -> bool {
        let action = payload.get("action").and_then(Value::as_str).unwrap_or("");
        self.matches_with(&[event], action, payload)
    }

    /// Matches when `event` is `*` or one of `events`, the action is
    /// listed (or none are), and every condition holds.
    pub(crate) fn matches_with(&self, events: &[&str], action: &str, payload: &Value) -> bool {
        if self.event != "*" && !events.contains(&self.event.as_str()) {
            return false;
        }
        if !self.actions.is_empty() && !self.actions.iter().any(|a| a == action) {
            return false;
        }
        self.when
            .iter()
            .all(|(path, want)| at(payload, path).unwrap_or(&Value::Null) == want)
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
        assert!(s.rules[0].matches("pull_request", &pr));
        assert!(!s.rules[0].matches(
            "pull_request",
            &json!({"action": "opened", "pull_request": {"draft": true}})
        ));
        assert!(!s.rules[0].matches("issues", &pr));
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
