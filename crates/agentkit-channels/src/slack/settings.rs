//! The settings of a `kind = "slack"` channel file, checked when the
//! channel is mounted and by `agentkit validate` (unknown keys are
//! errors, like everywhere else).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::env::Env;
use crate::pack::{Rule, check_rules, resolve};

/// `https://slack.com/api`: where the Web API lives unless `api_url`
/// says otherwise (a proxy, or a test server speaking the same format).
pub(crate) const DEFAULT_API_URL: &str = "https://slack.com/api";

/// How events reach the pack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Mode {
    /// A WebSocket the pack opens with the app token (no public URL).
    #[default]
    Socket,
    /// Slack POSTs to `/<slug>/v1/channels/<id>`, signed.
    Events,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    #[serde(default)]
    pub(crate) description: Option<String>,
    #[serde(default)]
    pub(crate) mode: Mode,
    /// `xoxb-…`; defaults to `${<PREFIX>_SLACK_BOT_TOKEN}`.
    #[serde(default)]
    pub(crate) bot_token: Option<String>,
    /// `xapp-…` with `connections:write` (Socket Mode); defaults to
    /// `${<PREFIX>_SLACK_APP_TOKEN}`.
    #[serde(default)]
    pub(crate) app_token: Option<String>,
    /// Verifies Events API and interactivity requests; defaults to
    /// `${<PREFIX>_SLACK_SIGNING_SECRET}`.
    #[serde(default)]
    pub(crate) signing_secret: Option<String>,
    /// `WEATHER_AGENT` → `WEATHER_AGENT_SLACK_BOT_TOKEN`, ...
    #[serde(default)]
    pub(crate) env_prefix: Option<String>,
    #[serde(default)]
    pub(crate) api_url: Option<String>,
    #[serde(default)]
    pub(crate) engagement: Engagement,
    /// Parked tool calls post an Approve / Deny card in the thread.
    #[serde(default)]
    pub(crate) tool_approvals: bool,
    /// Refuse Slack Connect (external) users, guests and other
    /// workspaces (default true).
    #[serde(default = "yes")]
    pub(crate) block_external: bool,
    /// The least time between two edits of a streamed reply (default
    /// `1s`: Slack allows about one `chat.update` per second per channel).
    #[serde(default)]
    pub(crate) update_interval: Option<String>,
    /// Stream replies with Slack's streaming methods where the workspace
    /// has them (default true); `false` always posts and edits.
    #[serde(default = "yes")]
    pub(crate) streaming: bool,
    #[serde(default)]
    pub(crate) assistant: Assistant,
    #[serde(default)]
    pub(crate) rules: Vec<Rule>,
}

/// Slack's assistant threads (the app's "agent view" in direct messages).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Assistant {
    /// Title each new thread with the start of its first message
    /// (default true).
    #[serde(default = "yes")]
    pub(crate) titles: bool,
    /// Offered when a user opens a new assistant thread (at most four).
    #[serde(default)]
    pub(crate) suggested_prompts: Vec<Prompt>,
}

impl Default for Assistant {
    fn default() -> Assistant {
        Assistant {
            titles: true,
            suggested_prompts: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Prompt {
    pub(crate) title: String,
    pub(crate) message: String,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Engagement {
    #[serde(default = "yes")]
    pub(crate) mentions: bool,
    #[serde(default = "yes")]
    pub(crate) direct_messages: bool,
    /// Channel watch: off unless set.
    #[serde(default)]
    pub(crate) channel_posts: Option<ChannelPosts>,
}

impl Default for Engagement {
    fn default() -> Engagement {
        Engagement {
            mentions: true,
            direct_messages: true,
            channel_posts: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelPosts {
    /// Channel ids (`C0123…`) to watch; no wildcard.
    pub(crate) allow: Vec<String>,
    #[serde(default)]
    pub(crate) posts: Posts,
    /// Let edits settle this long before dispatching (`15s`); a post
    /// deleted inside the window is not dispatched.
    #[serde(default)]
    pub(crate) debounce: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Posts {
    /// Top-level posts only (thread replies are left alone).
    #[default]
    TopLevel,
    /// Thread replies too.
    All,
}

/// The pack's credentials, resolved.
#[derive(Debug, Clone, Default)]
pub(crate) struct Credentials {
    pub(crate) bot_token: Option<String>,
    pub(crate) app_token: Option<String>,
    pub(crate) signing_secret: Option<String>,
}

impl Settings {
    pub(crate) fn parse(value: &Value) -> Result<Settings, String> {
        let s: Settings = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        check_rules(&s.rules)?;
        if let Some(p) = &s.env_prefix
            && (p.is_empty()
                || !p
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'))
        {
            return Err(format!(
                "`env_prefix` `{p}` must be upper-case letters, digits and `_` (it prefixes `_SLACK_BOT_TOKEN`)"
            ));
        }
        if let Some(posts) = &s.engagement.channel_posts {
            if posts.allow.is_empty() {
                return Err("`engagement.channel_posts.allow` is empty: list the channel ids to watch (there is no wildcard)".into());
            }
            if let Some(bad) = posts
                .allow
                .iter()
                .find(|c| c.contains('*') || c.trim().is_empty())
            {
                return Err(format!(
                    "`engagement.channel_posts.allow` entry `{bad}` is not a channel id (there is no wildcard)"
                ));
            }
            if let Some(d) = &posts.debounce {
                agentkit_manifest::parse_duration(d)
                    .map_err(|e| format!("`engagement.channel_posts.debounce`: {e}"))?;
            }
        }
        if s.assistant.suggested_prompts.len() > 4 {
            return Err(format!(
                "`assistant.suggested_prompts` has {} prompts; Slack shows at most 4",
                s.assistant.suggested_prompts.len()
            ));
        }
        if let Some(d) = &s.update_interval {
            agentkit_manifest::parse_duration(d).map_err(|e| format!("`update_interval`: {e}"))?;
        }
        Ok(s)
    }

    /// The variable a credential defaults to: `SLACK_BOT_TOKEN`, or
    /// `<PREFIX>_SLACK_BOT_TOKEN` with `env_prefix`.
    pub(crate) fn default_var(&self, name: &str) -> String {
        match &self.env_prefix {
            Some(p) => format!("{p}_{name}"),
            None => name.to_owned(),
        }
    }

    /// The credentials: each setting's `${VAR}`, else its default variable.
    pub(crate) fn credentials(&self, env: &Env) -> Credentials {
        let get = |setting: &Option<String>, var: &str| match setting {
            Some(s) => resolve(env, Some(s)),
            None => env.get(&self.default_var(var)),
        };
        Credentials {
            bot_token: get(&self.bot_token, "SLACK_BOT_TOKEN"),
            app_token: get(&self.app_token, "SLACK_APP_TOKEN"),
            signing_secret: get(&self.signing_secret, "SLACK_SIGNING_SECRET"),
        }
    }

    pub(crate) fn api_url(&self, env: &Env) -> String {
        resolve(env, self.api_url.as_deref())
            .unwrap_or_else(|| DEFAULT_API_URL.into())
            .trim_end_matches('/')
            .to_owned()
    }

    pub(crate) fn update_interval(&self) -> Duration {
        self.update_interval
            .as_deref()
            .and_then(|d| agentkit_manifest::parse_duration(d).ok())
            .unwrap_or(Duration::from_secs(1))
    }

    pub(crate) fn debounce(&self) -> Option<Duration> {
        self.engagement
            .channel_posts
            .as_ref()
            .and_then(|p| p.debounce.as_deref())
            .and_then(|d| agentkit_manifest::parse_duration(d).ok())
    }

    /// The Events API event types the settings need (for the app
    /// manifest and `doctor`).
    pub(crate) fn bot_events(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.engagement.mentions {
            out.push("app_mention");
        }
        if self.engagement.direct_messages {
            out.push("message.im");
            out.push("assistant_thread_started");
        }
        // Replies in a thread the bot took part in continue its session.
        out.push("message.channels");
        if self.engagement.channel_posts.is_some() {
            out.push("message.groups");
        }
        out
    }

    /// The bot scopes the settings need.
    pub(crate) fn bot_scopes(&self) -> Vec<&'static str> {
        let mut out = vec!["chat:write", "users:read"];
        if self.engagement.mentions {
            out.push("app_mentions:read");
        }
        if self.engagement.direct_messages {
            out.extend(["im:history", "im:read", "im:write"]);
        }
        out.push("channels:history");
        if self.engagement.channel_posts.is_some() {
            out.push("groups:history");
        }
        out.push("assistant:write");
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_default_to_socket_mode_mentions_and_dms_and_check_channel_watch() {
        let s = Settings::parse(&json!({})).unwrap();
        assert_eq!(s.mode, Mode::Socket);
        assert!(s.engagement.mentions && s.engagement.direct_messages && s.block_external);
        assert!(s.engagement.channel_posts.is_none());
        assert_eq!(s.update_interval(), Duration::from_secs(1));
        let err = |v: Value| Settings::parse(&v).unwrap_err();
        assert!(err(json!({"bogus": 1})).contains("unknown field `bogus`"));
        assert!(err(json!({"mode": "http"})).contains("unknown variant `http`"));
        assert!(
            err(json!({"engagement": {"channel_posts": {"allow": []}}})).contains("no wildcard")
        );
        assert!(err(json!({"engagement": {"channel_posts": {"allow": ["*"]}}})).contains("`*`"));
        assert!(
            err(json!({"engagement": {"channel_posts": {"allow": ["C1"], "debounce": "soon"}}}))
                .contains("debounce")
        );
        assert!(err(json!({"env_prefix": "weather"})).contains("upper-case"));
        let s = Settings::parse(&json!({"env_prefix": "WEATHER_AGENT", "engagement": {"channel_posts": {"allow": ["C1"], "posts": "all", "debounce": "2s"}}})).unwrap();
        assert_eq!(
            s.default_var("SLACK_BOT_TOKEN"),
            "WEATHER_AGENT_SLACK_BOT_TOKEN"
        );
        assert_eq!(s.debounce(), Some(Duration::from_secs(2)));
        assert_eq!(
            s.engagement.channel_posts.as_ref().unwrap().posts,
            Posts::All
        );
        let env = Env::new(|n| (n == "WEATHER_AGENT_SLACK_BOT_TOKEN").then(|| "xoxb-1".to_owned()));
        let c = s.credentials(&env);
        assert_eq!(c.bot_token.as_deref(), Some("xoxb-1"));
        assert!(c.app_token.is_none());
    }
}
