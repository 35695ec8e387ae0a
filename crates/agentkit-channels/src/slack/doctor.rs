//! `agentkit slack doctor`: checks a slack channel's credentials against
//! Slack (`auth.test` for the bot token and its scopes,
//! `apps.connections.open` for the app token) and says what to fix. The
//! event subscriptions live in the app's configuration, which these
//! tokens cannot read: the report lists the ones the settings need.

use agentkit_manifest::Channel;
use serde::Serialize;
use serde_json::json;

use super::client::SlackApi;
use super::parse_settings;
use super::settings::Mode;
use crate::env::Env;
use crate::error::Result;

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlackCheck {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    /// What to do when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(name: &str, ok: bool, detail: String, fix: Option<String>) -> SlackCheck {
    SlackCheck {
        name: name.to_owned(),
        ok,
        detail,
        fix: if ok { None } else { fix },
    }
}

/// Checks `channel` (a `kind = "slack"` file) with the credentials `env`
/// resolves; `prefix` replaces the file's `env_prefix`.
pub async fn slack_doctor(
    channel: &Channel,
    env: &Env,
    prefix: Option<&str>,
) -> Result<Vec<SlackCheck>> {
    let mut settings = parse_settings(channel)?;
    if let Some(p) = prefix {
        settings.env_prefix = Some(p.to_owned());
    }
    let creds = settings.credentials(env);
    let api_url = settings.api_url(env);
    let var = |n: &str| settings.default_var(n);
    let mut out = Vec::new();
    match &creds.bot_token {
        None => out.push(check(
            "bot token",
            false,
            format!("`{}` is not set", var("SLACK_BOT_TOKEN")),
            Some(format!(
                "set {} to the app's Bot User OAuth Token (OAuth & Permissions, `xoxb-…`)",
                var("SLACK_BOT_TOKEN")
            )),
        )),
        Some(token) => {
            let api = SlackApi::new(&api_url, token);
            match api.auth_test().await {
                Ok((who, scopes)) => {
                    out.push(check(
                        "bot token",
                        true,
                        format!(
                            "`auth.test`: bot <@{}> in workspace {} ({})",
                            who["user_id"].as_str().unwrap_or("?"),
                            who["team"].as_str().unwrap_or("?"),
                            who["team_id"].as_str().unwrap_or("?")
                        ),
                        None,
                    ));
                    let missing: Vec<&str> = settings
                        .bot_scopes()
                        .into_iter()
                        .filter(|s| !scopes.iter().any(|have| have == s))
                        .collect();
                    out.push(check(
                        "scopes",
                        missing.is_empty(),
                        if missing.is_empty() {
                            format!("the token has every scope the settings need ({})", settings.bot_scopes().join(", "))
                        } else {
                            format!("missing {}", missing.join(", "))
                        },
                        Some("add the scopes under OAuth & Permissions (or re-create the app from `agentkit slack manifest`) and reinstall the app".into()),
                    ));
                }
                Err(e) => out.push(check(
                    "bot token",
                    false,
                    format!("`auth.test` failed: {}", e.code),
                    Some(format!(
                        "check {} (a Bot User OAuth Token, `xoxb-…`, of an installed app)",
                        var("SLACK_BOT_TOKEN")
                    )),
                )),
            }
        }
    }
    match settings.mode {
        Mode::Socket => match &creds.app_token {
            None => out.push(check(
                "app token",
                false,
                format!("`{}` is not set (Socket Mode needs it)", var("SLACK_APP_TOKEN")),
                Some(format!(
                    "create an App-Level Token with `connections:write` (Basic Information) and set {}",
                    var("SLACK_APP_TOKEN")
                )),
            )),
            Some(token) => {
                let api = SlackApi::new(&api_url, token);
                let r = api.call("apps.connections.open", &json!({})).await;
                out.push(check(
                    "app token",
                    r.is_ok(),
                    match &r {
                        Ok(_) => "`apps.connections.open`: Socket Mode can connect".into(),
                        Err(e) => format!("`apps.connections.open` failed: {}", e.code),
                    },
                    Some(
                        "use an App-Level Token (`xapp-…`) with `connections:write`, and turn Socket Mode on in the app settings"
                            .into(),
                    ),
                ));
            }
        },
        Mode::Events => out.push(check(
            "signing secret",
            creds.signing_secret.is_some(),
            if creds.signing_secret.is_some() {
                "set: Events API requests are verified".into()
            } else {
                format!("`{}` is not set", var("SLACK_SIGNING_SECRET"))
            },
            Some(format!(
                "set {} to the app's Signing Secret (Basic Information)",
                var("SLACK_SIGNING_SECRET")
            )),
        )),
    }
    out.push(SlackCheck {
        name: "event subscriptions".into(),
        ok: true,
        detail: format!(
            "the app must subscribe to these bot events: {} (Event Subscriptions; tokens cannot read this, so check it there){}",
            settings.bot_events().join(", "),
            if settings.tool_approvals {
                "; approvals also need Interactivity turned on"
            } else {
                ""
            }
        ),
        fix: None,
    });
    Ok(out)
}
