//! `agentkit slack manifest` and `doctor`: the app manifest follows the
//! channel file's settings, and the doctor checks the tokens and scopes
//! against a mock Slack (`agentkit_test_support::slack`).

use std::path::{Path, PathBuf};

use agentkit_test_support::slack::MockSlack;
use serde_json::{Value, json};

use super::agentkit_with;

const SLACK: &str = "kind = \"slack\"\napi_url = \"${SLACK_API_URL}\"\ntool_approvals = true\n\n[engagement.channel_posts]\nallow = [\"C0ALERTS\"]\n";

fn project(root: &Path, channel: &str) -> PathBuf {
    let dir = root.join("weather");
    let agent = dir.join("agent");
    std::fs::create_dir_all(agent.join("channels")).unwrap();
    std::fs::write(agent.join("agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(agent.join("instructions.md"), "You tell the weather.\n").unwrap();
    std::fs::write(agent.join("channels/slack.toml"), channel).unwrap();
    dir
}

#[test]
fn manifest_writes_the_app_manifest_and_env_example_the_settings_need() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), SLACK);
    let run = agentkit_with(&dir, &["slack", "manifest", "--name", "Weather"], |_| {});
    assert_eq!(run.code, 0, "{}", run.stderr);
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(".agentkit/slack/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["display_information"]["name"], "Weather");
    assert_eq!(manifest["settings"]["socket_mode_enabled"], true);
    // Approvals are on in the file: interactivity is too.
    assert_eq!(manifest["settings"]["interactivity"]["is_enabled"], true);
    let events = manifest["settings"]["event_subscriptions"]["bot_events"].to_string();
    for e in [
        "app_mention",
        "message.im",
        "message.channels",
        "message.groups",
    ] {
        assert!(events.contains(e), "{e}: {events}");
    }
    assert!(manifest["features"]["assistant_view"].is_object());
    let env = std::fs::read_to_string(dir.join(".agentkit/slack/env.example")).unwrap();
    assert!(
        env.contains("SLACK_BOT_TOKEN=\n") && env.contains("SLACK_APP_TOKEN=\n"),
        "{env}"
    );

    let url = "https://bot.example.com/weather/v1/channels/slack";
    let run = agentkit_with(
        &dir,
        &["slack", "manifest", "--events-url", url, "--json"],
        |_| {},
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(out["manifest"]["settings"]["socket_mode_enabled"], false);
    assert_eq!(
        out["manifest"]["settings"]["event_subscriptions"]["request_url"],
        url
    );
    assert_eq!(
        out["manifest"]["settings"]["interactivity"]["request_url"],
        url
    );
    let env = std::fs::read_to_string(dir.join(".agentkit/slack/env.example")).unwrap();
    assert!(env.contains("SLACK_SIGNING_SECRET=\n"), "{env}");
}

#[test]
fn doctor_checks_tokens_and_scopes_against_slack_and_says_what_to_fix() {
    let mock = MockSlack::start();
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), SLACK);
    let doctor = |bot: &str, app: &str, extra: &[&str]| {
        let mut args = vec!["slack", "doctor"];
        args.extend_from_slice(extra);
        agentkit_with(&dir, &args, |cmd| {
            cmd.env("SLACK_API_URL", mock.api_url())
                .env("WEATHER_SLACK_BOT_TOKEN", bot)
                .env("WEATHER_SLACK_APP_TOKEN", app)
                .env_remove("SLACK_BOT_TOKEN")
                .env_remove("SLACK_APP_TOKEN");
        })
    };
    let run = doctor("xoxb-1", "xapp-1", &["--prefix", "WEATHER"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("ok  bot token"), "{}", run.stdout);
    assert!(run.stdout.contains("ok  app token"), "{}", run.stdout);
    assert!(run.stdout.contains("message.groups"), "{}", run.stdout);
    let calls: Vec<String> = mock.calls().iter().map(|c| c.method.clone()).collect();
    assert_eq!(calls, ["auth.test", "apps.connections.open"]);

    // Missing scopes, a bot token where the app token goes, and no
    // prefix (so the unprefixed variables, unset): each says what to do.
    mock.set_scopes("chat:write,users:read");
    let run = doctor(
        "xoxb-1",
        "xoxb-not-an-app-token",
        &["--prefix", "WEATHER", "--json"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(check("scopes")["ok"], false);
    assert!(
        check("scopes")["detail"]
            .as_str()
            .unwrap()
            .contains("app_mentions:read")
    );
    assert_eq!(check("app token")["ok"], false);
    assert!(
        check("app token")["detail"]
            .as_str()
            .unwrap()
            .contains("not_allowed_token_type")
    );
    assert!(
        check("app token")["fix"]
            .as_str()
            .unwrap()
            .contains("connections:write")
    );
    let run = doctor("xoxb-1", "xapp-1", &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("`SLACK_BOT_TOKEN` is not set"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("xoxb-1") && !run.stdout.contains("xapp-1"));
}

#[test]
fn validate_reports_slack_settings_with_file_line_and_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = "kind = \"slack\"\nmode = \"http\"\n\n[engagement.channel_posts]\nallow = [\"*\"]\n\n[[rules]]\nevent = \"app_mentoin\"\nskip = true\n";
    let dir = project(tmp.path(), bad);
    let run = agentkit_with(&dir, &["validate", "--json"], |_| {});
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    let diags: Vec<&Value> = out["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["path"] == "agent/channels/slack.toml")
        .collect();
    let mode = diags
        .iter()
        .find(|d| {
            d["message"]
                .as_str()
                .unwrap()
                .contains("unknown variant `http`")
        })
        .unwrap_or_else(|| panic!("{diags:#?}"));
    assert_eq!(
        (mode["severity"].clone(), mode["line"].clone()),
        (json!("error"), json!(2))
    );
    assert!(mode["hint"].is_string(), "{mode}");
    let event = diags
        .iter()
        .find(|d| d["message"].as_str().unwrap().contains("app_mentoin"))
        .unwrap_or_else(|| panic!("{diags:#?}"));
    assert_eq!(event["line"], 8);
    assert!(
        event["hint"].as_str().unwrap().contains("app_mention"),
        "{event}"
    );
    // Fixed, the file is clean.
    std::fs::write(dir.join("agent/channels/slack.toml"), SLACK).unwrap();
    let run = agentkit_with(&dir, &["validate"], |cmd| {
        cmd.env("SLACK_API_URL", "http://127.0.0.1:9/api");
    });
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
}

/// `slack init` adds a channel file whose credentials are the guide's
/// `${SLACK_…}` references and the dev (Socket Mode) / prod (Events API at
/// `--url`) manifest pair; the project still validates with no
/// diagnostic; a second run refuses to overwrite unless `--force`.
#[test]
fn init_writes_the_channel_file_and_the_dev_and_prod_manifests() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("weather");
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(dir.join("agent/agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(dir.join("agent/instructions.md"), "You tell the weather.\n").unwrap();
    let no_slack_env = |cmd: &mut std::process::Command| {
        for v in ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"] {
            cmd.env_remove(v);
        }
    };
    let init = |extra: &[&str]| {
        let mut args = vec![
            "slack",
            "init",
            "--name",
            "Weather",
            "--url",
            "https://bot.example.com/",
        ];
        args.extend_from_slice(extra);
        agentkit_with(&dir, &args, no_slack_env)
    };
    let run = init(&[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("manifest.prod.json"), "{}", run.stdout);

    let channel = std::fs::read_to_string(dir.join("agent/channels/slack.toml")).unwrap();
    assert!(channel.contains("kind = \"slack\""), "{channel}");
    for var in [
        "bot_token = \"${SLACK_BOT_TOKEN:-}\"",
        "signing_secret = \"${SLACK_SIGNING_SECRET:-}\"",
        "app_token = \"${SLACK_APP_TOKEN:-}\"",
    ] {
        assert!(channel.contains(var), "{var}: {channel}");
    }
    let read = |name: &str| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(dir.join(".agentkit/slack").join(name)).unwrap(),
        )
        .unwrap()
    };
    let dev = read("manifest.dev.json");
    assert_eq!(dev["display_information"]["name"], "Weather");
    assert_eq!(dev["settings"]["socket_mode_enabled"], true);
    assert!(
        dev["settings"]["event_subscriptions"]
            .get("request_url")
            .is_none()
    );
    let prod = read("manifest.prod.json");
    assert_eq!(prod["settings"]["socket_mode_enabled"], false);
    assert_eq!(
        prod["settings"]["event_subscriptions"]["request_url"],
        "https://bot.example.com/weather/v1/channels/slack"
    );
    assert_eq!(
        prod["settings"]["event_subscriptions"]["bot_events"],
        dev["settings"]["event_subscriptions"]["bot_events"]
    );

    let env = std::fs::read_to_string(dir.join(".agentkit/slack/env.example")).unwrap();
    for v in [
        "SLACK_BOT_TOKEN=\n",
        "SLACK_APP_TOKEN=\n",
        "SLACK_SIGNING_SECRET=\n",
    ] {
        assert!(env.contains(v), "{v}: {env}");
    }

    // A second app's channel, its variables prefixed.
    let run = agentkit_with(
        &dir,
        &[
            "slack",
            "init",
            "--channel",
            "ops",
            "--prefix",
            "WEATHER_OPS",
            "--force",
        ],
        no_slack_env,
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let ops = std::fs::read_to_string(dir.join("agent/channels/ops.toml")).unwrap();
    assert!(
        ops.contains("env_prefix = \"WEATHER_OPS\"")
            && ops.contains("bot_token = \"${WEATHER_OPS_SLACK_BOT_TOKEN:-}\""),
        "{ops}"
    );
    let env = std::fs::read_to_string(dir.join(".agentkit/slack/env.example")).unwrap();
    assert!(env.contains("WEATHER_OPS_SLACK_APP_TOKEN=\n"), "{env}");

    let run = agentkit_with(&dir, &["validate", "--json"], no_slack_env);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        report["diagnostics"],
        json!([]),
        "{}",
        serde_json::to_string_pretty(&report).unwrap()
    );
    std::fs::remove_file(dir.join("agent/channels/ops.toml")).unwrap();

    // No silent overwrite; --force does.
    std::fs::write(dir.join("agent/channels/slack.toml"), "kind = \"slack\"\n").unwrap();
    let run = init(&[]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("already exist") && run.stderr.contains("--force"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("agent/channels/slack.toml")).unwrap(),
        "kind = \"slack\"\n"
    );
    let run = init(&["--force", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        out["requestUrl"],
        "https://bot.example.com/weather/v1/channels/slack"
    );
    assert!(
        std::fs::read_to_string(dir.join("agent/channels/slack.toml"))
            .unwrap()
            .contains("${SLACK_BOT_TOKEN:-}")
    );
}

/// `slack setup` on a project without a slack channel adds it (as `init`)
/// and says what is missing (exit 1); on a project with one it keeps the
/// file and, with the tokens set, the checks pass against a mock Slack.
#[test]
fn setup_adds_the_channel_then_checks_the_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("weather");
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(dir.join("agent/agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(dir.join("agent/instructions.md"), "You tell the weather.\n").unwrap();
    let run = agentkit_with(&dir, &["slack", "setup"], |c| {
        for v in ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"] {
            c.env_remove(v);
        }
    });
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(dir.join("agent/channels/slack.toml").is_file());
    assert!(dir.join(".agentkit/slack/manifest.dev.json").is_file());
    assert!(
        run.stdout.contains("FIX bot token") && run.stdout.contains("SLACK_BOT_TOKEN"),
        "{}",
        run.stdout
    );

    // An existing channel is kept; with its tokens, every check passes.
    let mock = MockSlack::start();
    std::fs::write(dir.join("agent/channels/slack.toml"), SLACK).unwrap();
    let run = agentkit_with(&dir, &["slack", "setup"], |c| {
        c.env("SLACK_API_URL", mock.api_url())
            .env("SLACK_BOT_TOKEN", "xoxb-1")
            .env("SLACK_APP_TOKEN", "xapp-1");
    });
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("(kept)"), "{}", run.stdout);
    assert!(run.stdout.contains("ok  bot token"), "{}", run.stdout);
    assert_eq!(
        std::fs::read_to_string(dir.join("agent/channels/slack.toml")).unwrap(),
        SLACK
    );
}
