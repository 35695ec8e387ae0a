//! The Slack app manifest a slack channel needs (`agentkit slack
//! manifest`): the bot scopes and events its settings use, Socket Mode or
//! an Events API request URL, interactivity when approvals are on, the
//! assistant view; and the `env.example` naming its variables.

use agentkit_manifest::Channel;
use serde_json::{Value, json};

use super::settings::{Mode, Settings};
use crate::error::{Error, Result};

/// What the command line adds to the channel's settings.
#[derive(Debug, Clone, Default)]
pub struct SlackManifestOptions {
    /// The app's display name.
    pub name: String,
    pub description: Option<String>,
    /// The Events API request URL; Socket Mode when `None`.
    pub events_url: Option<String>,
    /// Subscribe to channel posts (channel watch) even if the settings
    /// do not watch any yet.
    pub channel_posts: bool,
    /// Turn interactivity on for approval cards even if the settings do
    /// not ask for them yet.
    pub approvals: bool,
}

/// The app manifest (Slack's JSON manifest format) for `channel` (a
/// `kind = "slack"` file; `None` takes the defaults).
pub fn slack_app_manifest(
    channel: Option<&Channel>,
    options: &SlackManifestOptions,
) -> Result<Value> {
    let settings = settings_of(channel)?;
    let mut events = settings.bot_events();
    let mut scopes = settings.bot_scopes();
    if options.channel_posts && settings.engagement.channel_posts.is_none() {
        events.push("message.groups");
        scopes.push("groups:history");
    }
    let interactive = options.approvals || settings.tool_approvals;
    let socket = options.events_url.is_none();
    let mut subscriptions = json!({"bot_events": events});
    let mut interactivity = json!({"is_enabled": interactive});
    if let Some(url) = &options.events_url {
        subscriptions["request_url"] = json!(url);
        if interactive {
            interactivity["request_url"] = json!(url);
        }
    }
    let description = options
        .description
        .clone()
        .or_else(|| settings.description.clone())
        .unwrap_or_else(|| format!("{} (an agentkit agent)", options.name));
    Ok(json!({
        "_metadata": {"major_version": 1, "minor_version": 1},
        "display_information": {
            "name": options.name,
            "description": description.chars().take(139).collect::<String>(),
        },
        "features": {
            "app_home": {
                "home_tab_enabled": false,
                "messages_tab_enabled": true,
                "messages_tab_read_only_enabled": false
            },
            "bot_user": {"display_name": options.name, "always_online": true},
            "assistant_view": {
                "assistant_description": description.chars().take(139).collect::<String>(),
                "suggested_prompts": settings.assistant.suggested_prompts
            }
        },
        "oauth_config": {"scopes": {"bot": scopes}},
        "settings": {
            "event_subscriptions": subscriptions,
            "interactivity": interactivity,
            "org_deploy_enabled": false,
            "socket_mode_enabled": socket,
            "token_rotation_enabled": false
        }
    }))
}

/// `env.example`: the variables the channel reads, empty.
pub fn slack_env_example(channel: Option<&Channel>, events_mode: bool) -> Result<String> {
    let settings = settings_of(channel)?;
    let var = |name: &str| settings.default_var(name);
    let mut out = String::from(
        "# Slack credentials of this agent's app (https://api.slack.com/apps → your app)\n",
    );
    out.push_str(&format!(
        "# OAuth & Permissions → Bot User OAuth Token (xoxb-…)\n{}=\n",
        var("SLACK_BOT_TOKEN")
    ));
    if events_mode || settings.mode == Mode::Events {
        out.push_str(&format!(
            "# Basic Information → Signing Secret (checks Events API requests)\n{}=\n",
            var("SLACK_SIGNING_SECRET")
        ));
    } else {
        out.push_str(&format!(
            "# Basic Information → App-Level Tokens, scope connections:write (xapp-…)\n{}=\n",
            var("SLACK_APP_TOKEN")
        ));
    }
    Ok(out)
}

fn settings_of(channel: Option<&Channel>) -> Result<Settings> {
    let value = channel
        .and_then(|c| c.settings.clone())
        .unwrap_or_else(|| json!({}));
    Settings::parse(&value).map_err(|message| Error::Config {
        channel: channel.map_or_else(|| "slack".to_owned(), |c| c.id.clone()),
        message,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn manifests_follow_the_transport_and_the_features_asked_for() {
        let socket = slack_app_manifest(
            None,
            &SlackManifestOptions {
                name: "Weather".into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(socket["settings"]["socket_mode_enabled"], true);
        assert_eq!(socket["settings"]["interactivity"]["is_enabled"], false);
        assert!(
            socket["settings"]["event_subscriptions"]
                .get("request_url")
                .is_none()
        );
        let events = socket["settings"]["event_subscriptions"]["bot_events"].to_string();
        assert!(
            events.contains("app_mention") && events.contains("message.im"),
            "{events}"
        );
        let scopes = socket["oauth_config"]["scopes"]["bot"].to_string();
        assert!(scopes.contains("chat:write") && scopes.contains("app_mentions:read"));
        let http = slack_app_manifest(
            None,
            &SlackManifestOptions {
                name: "Weather".into(),
                events_url: Some("https://bot.example.com/weather/v1/channels/slack".into()),
                approvals: true,
                channel_posts: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(http["settings"]["socket_mode_enabled"], false);
        assert_eq!(
            http["settings"]["interactivity"]["request_url"],
            "https://bot.example.com/weather/v1/channels/slack"
        );
        assert!(
            http["settings"]["event_subscriptions"]["bot_events"]
                .to_string()
                .contains("message.groups")
        );
        let env = slack_env_example(None, false).unwrap();
        assert!(env.contains("SLACK_APP_TOKEN=") && !env.contains("SIGNING"));
    }
}
