//! Pack settings (`kind = "github"`, `"gitlab"`, `"bitbucket"`, `"slack"`) as
//! `agentkit validate` reports them: file, line and hint for every problem
//! that would stop `serve` (the same parsers and rule checks serving
//! runs, so the two never disagree), plus warnings for what serves but is
//! probably not meant (rule events the provider never sends, no webhook
//! secret).

use agentkit_manifest::{Channel, ChannelKind, Code, Diagnostic, Position, did_you_mean};
use serde_json::{Value, json};

use crate::pack::{Rule, check_rule};

/// `X-GitHub-Event` names GitHub sends to repository, organisation and
/// App webhooks.
const GITHUB_EVENTS: &[&str] = &[
    "branch_protection_configuration",
    "branch_protection_rule",
    "check_run",
    "check_suite",
    "code_scanning_alert",
    "commit_comment",
    "create",
    "custom_property",
    "custom_property_values",
    "delete",
    "dependabot_alert",
    "deploy_key",
    "deployment",
    "deployment_protection_rule",
    "deployment_review",
    "deployment_status",
    "discussion",
    "discussion_comment",
    "fork",
    "github_app_authorization",
    "gollum",
    "installation",
    "installation_repositories",
    "installation_target",
    "issue_comment",
    "issues",
    "label",
    "marketplace_purchase",
    "member",
    "membership",
    "merge_group",
    "meta",
    "milestone",
    "org_block",
    "organization",
    "package",
    "page_build",
    "personal_access_token_request",
    "ping",
    "project",
    "project_card",
    "project_column",
    "projects_v2",
    "projects_v2_item",
    "public",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_review_thread",
    "push",
    "registry_package",
    "release",
    "repository",
    "repository_advisory",
    "repository_dispatch",
    "repository_import",
    "repository_ruleset",
    "repository_vulnerability_alert",
    "secret_scanning_alert",
    "secret_scanning_alert_location",
    "security_advisory",
    "security_and_analysis",
    "sponsorship",
    "star",
    "status",
    "sub_issues",
    "team",
    "team_add",
    "watch",
    "workflow_dispatch",
    "workflow_job",
    "workflow_run",
];

/// GitLab's `object_kind`s and `X-Gitlab-Event` headers.
const GITLAB_EVENTS: &[&str] = &[
    "push",
    "tag_push",
    "issue",
    "work_item",
    "note",
    "merge_request",
    "wiki_page",
    "pipeline",
    "build",
    "deployment",
    "feature_flag",
    "release",
    "milestone",
    "emoji",
    "access_token",
    "vulnerability",
    "member",
    "project",
    "subgroup",
    "Push Hook",
    "Tag Push Hook",
    "Issue Hook",
    "Confidential Issue Hook",
    "Note Hook",
    "Confidential Note Hook",
    "Merge Request Hook",
    "Wiki Page Hook",
    "Pipeline Hook",
    "Job Hook",
    "Deployment Hook",
    "Feature Flag Hook",
    "Release Hook",
    "Milestone Hook",
    "Emoji Hook",
    "Resource Access Token Hook",
    "Vulnerability Hook",
    "Member Hook",
    "Project Hook",
    "Subgroup Hook",
];

/// Slack event types a `[[rules]]` entry may name (`message.<type>` for
/// a message in one kind of conversation).
const SLACK_EVENTS: &[&str] = &[
    "app_mention",
    "message",
    "message.im",
    "message.channel",
    "message.group",
    "message.mpim",
    "reaction_added",
    "reaction_removed",
    "member_joined_channel",
    "member_left_channel",
    "channel_created",
    "channel_rename",
    "app_home_opened",
    "assistant_thread_started",
    "assistant_thread_context_changed",
    "file_shared",
    "pin_added",
    "pin_removed",
    "team_join",
    "user_change",
];

/// What a check found, before it has a line.
struct Problem {
    code: Code,
    error: bool,
    /// `rules[i]` when the problem is in a rule.
    rule: Option<usize>,
    /// The key the problem is about, inside the rule or at the top.
    key: Option<String>,
    message: String,
    hint: Option<String>,
}

/// The diagnostics of one pack channel file; `source` is its text. Other
/// kinds have none here (the manifest checks them).
pub fn pack_diagnostics(channel: &Channel, source: &str) -> Vec<Diagnostic> {
    let (label, known, secret_var): (&str, &[&str], &str) = match channel.kind {
        ChannelKind::Github => ("GitHub", GITHUB_EVENTS, "GITHUB_WEBHOOK_SECRET"),
        ChannelKind::Gitlab => ("GitLab", GITLAB_EVENTS, "GITLAB_WEBHOOK_SECRET"),
        ChannelKind::Bitbucket => ("Bitbucket", &[], "BITBUCKET_WEBHOOK_SECRET"),
        ChannelKind::Slack => ("Slack", SLACK_EVENTS, ""),
        _ => return Vec::new(),
    };
    let settings = channel.settings.clone().unwrap_or_else(|| json!({}));
    let mut problems = Vec::new();
    // Rules one by one, so each problem has its rule.
    let rules = settings.get("rules").and_then(Value::as_array);
    for (i, raw) in rules.into_iter().flatten().enumerate() {
        match serde_json::from_value::<Rule>(raw.clone()) {
            Err(e) => problems.push(serde_problem(Some(i), &e.to_string(), label, Some(raw))),
            Ok(rule) => {
                if let Err((key, message)) = check_rule(i, &rule) {
                    problems.push(Problem {
                        code: match key {
                            None | Some("task" | "command") => Code::ConflictingFields,
                            Some("env") => Code::InvalidValue,
                            Some(_) => Code::InvalidTemplate,
                        },
                        error: true,
                        rule: Some(i),
                        key: key.map(str::to_owned),
                        message,
                        hint: Some(
                            match key {
                                None => "give the rule one `[rules.turn]`, one `[rules.task]`, or `skip = true`",
                                Some("task") => "set either `command = [...]` or `tool = \"...\"`",
                                Some("command") => "name the program and its arguments: `command = [\"python3\", \"lib/x.py\"]`",
                                Some("env") => "list host variable names to pass to the command: `env = [\"GITHUB_TOKEN\"]`",
                                Some(_) => "templates are minijinja: `{{ path.to.value }}` over the delivery",
                            }
                            .into(),
                        ),
                    });
                }
                let event = rule.event.as_str();
                let is_known = event == "*"
                    || match channel.kind {
                        ChannelKind::Bitbucket => crate::bitbucket::is_known_event(event),
                        _ => known.contains(&event),
                    };
                if !is_known {
                    let candidates = match channel.kind {
                        ChannelKind::Bitbucket => crate::bitbucket::KNOWN_EVENTS,
                        _ => known,
                    };
                    problems.push(Problem {
                        code: Code::UnknownEvent,
                        error: false,
                        rule: Some(i),
                        key: Some("event".into()),
                        message: format!(
                            "rules[{i}]: {label} never sends the event `{event}`, so this rule never matches"
                        ),
                        hint: Some(match did_you_mean(event, candidates.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => format!("see the {label} pack's guide for its event names"),
                        }),
                    });
                }
            }
        }
    }
    // Everything else, through the parser serving uses.
    let mut top = settings.clone();
    if let Some(obj) = top.as_object_mut() {
        obj.insert("rules".into(), json!([]));
    }
    let parsed = match channel.kind {
        ChannelKind::Github => crate::github::settings::Settings::parse(&top).map(|_| ()),
        ChannelKind::Slack => crate::slack::settings::Settings::parse(&top).map(|_| ()),
        _ => crate::pack::ReplySettings::parse(&top).map(|_| ()),
    };
    if let Err(message) = parsed {
        let mut p = serde_problem(None, &message, label, Some(&settings));
        if channel.kind == ChannelKind::Slack {
            // Slack's messages name nested keys by their dotted path
            // (`engagement.channel_posts.allow`): place them at the line
            // of the last segment.
            // A bad value (`unknown variant `http``) is placed at the key
            // that holds it.
            let quoted: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
            if p.key.is_none() {
                p.key = quoted
                    .iter()
                    .find_map(|q| {
                        settings.as_object().and_then(|o| {
                            o.iter()
                                .find(|(_, v)| v.as_str() == Some(q))
                                .map(|(k, _)| k.clone())
                        })
                    })
                    .or_else(|| {
                        quoted
                            .iter()
                            .find(|q| q.contains('.'))
                            .and_then(|k| k.rsplit('.').next())
                            .map(str::to_owned)
                    });
            }
            p.hint.get_or_insert_with(|| {
                "see the Slack pack's settings in the channels reference (docs/reference/channels.md)"
                    .to_owned()
            });
        }
        problems.push(p);
    }
    if channel.kind == ChannelKind::Slack {
        // Credentials default to `SLACK_*` variables: nothing to warn
        // about here (`validate` reports unset `${VAR}`s, and serving
        // says which credentials an idle channel lacks).
    } else if channel.auth.is_none() && settings.get("webhook_secret").is_none() {
        problems.push(Problem {
            code: Code::MissingField,
            error: false,
            rule: None,
            key: Some("kind".into()),
            message: format!(
                "no `webhook_secret`: the {label} channel admits only loopback deliveries"
            ),
            hint: Some(format!(
                "set webhook_secret = \"${{{secret_var}}}\" to accept signed deliveries from {label}"
            )),
        });
    }
    problems
        .into_iter()
        .map(|p| {
            let d = if p.error {
                Diagnostic::error(p.code, channel.path.clone(), p.message)
            } else {
                Diagnostic::warning(p.code, channel.path.clone(), p.message)
            };
            d.at(locate(source, p.rule, p.key.as_deref()))
                .with_opt_hint(p.hint)
        })
        .collect()
}

/// A serde (or pack) message as a problem, with the key it names.
fn serde_problem(
    rule: Option<usize>,
    message: &str,
    label: &str,
    present: Option<&Value>,
) -> Problem {
    let named = |marker: &str| {
        message
            .split_once(marker)
            .and_then(|(_, rest)| rest.split('`').next())
            .map(str::to_owned)
    };
    let prefix = rule.map(|i| format!("rules[{i}]: ")).unwrap_or_default();
    if let Some(field) = named("unknown field `") {
        let expected = message
            .split_once("expected one of ")
            .or_else(|| message.split_once("expected "))
            .map(|(_, e)| e.to_owned());
        return Problem {
            code: Code::UnknownField,
            error: true,
            rule,
            message: format!("{prefix}unknown field `{field}` in the {label} pack's settings"),
            hint: expected.map(|e| format!("the fields are {e}")),
            key: Some(field),
        };
    }
    Problem {
        code: if named("missing field `").is_some() {
            Code::MissingField
        } else {
            Code::InvalidValue
        },
        error: true,
        rule,
        key: named("missing field `").or_else(|| {
            // The first key of the file the pack's own message names
            // (`app_id`, ...).
            message
                .split('`')
                .skip(1)
                .step_by(2)
                .find(|k| present.is_some_and(|p| p.get(*k).is_some()))
                .map(str::to_owned)
        }),
        message: format!("{prefix}{message}"),
        hint: None,
    }
}

/// The line of `key` (in the `rule`th `[[rules]]` table when set), else of
/// the rule, else nothing.
fn locate(source: &str, rule: Option<usize>, key: Option<&str>) -> Option<Position> {
    let lines: Vec<&str> = source.lines().collect();
    let (start, end) = match rule {
        None => (0, lines.len()),
        Some(i) => {
            let heads: Vec<usize> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.trim_start().starts_with("[[rules]]"))
                .map(|(n, _)| n)
                .collect();
            let start = *heads.get(i)?;
            let end = heads.get(i + 1).copied().unwrap_or(lines.len());
            (start, end)
        }
    };
    let pos = |n: usize| {
        Some(Position {
            line: u32::try_from(n + 1).ok()?,
            column: 1,
        })
    };
    if let Some(key) = key {
        for (n, line) in lines.iter().enumerate().take(end).skip(start) {
            let t = line.trim_start();
            let assigns = t
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='));
            let table = t.starts_with('[')
                && t.trim_start_matches('[')
                    .split(['.', ']'])
                    .any(|part| part.trim() == key);
            let inline = t.contains(&format!("{key} =")) || t.contains(&format!("{key}="));
            if assigns || (rule.is_some() && (table || inline)) {
                return pos(n);
            }
        }
    }
    match rule {
        Some(_) => pos(start),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keys_are_found_in_their_rule() {
        let src = "kind = \"gitlab\"\nbogus = 1\n\n[[rules]]\nevent = \"note\"\n[rules.turn]\n\n[[rules]]\nevent = \"x\"\n[rules.turn]\nmessage = \"{{ x\"\n";
        assert_eq!(locate(src, None, Some("bogus")).unwrap().line, 2);
        assert_eq!(locate(src, Some(1), Some("message")).unwrap().line, 11);
        assert_eq!(locate(src, Some(0), Some("event")).unwrap().line, 5);
        assert_eq!(locate(src, Some(1), Some("nothing")).unwrap().line, 8);
        assert_eq!(locate(src, Some(2), None), None);
    }

    #[test]
    fn slack_settings_problems_have_a_line_and_a_hint() {
        let source =
            "kind = \"slack\"\nmode = \"socket\"\n\n[engagement.channel_posts]\nallow = []\n";
        let channel = Channel {
            id: "slack".into(),
            path: "agent/channels/slack.toml".into(),
            kind: ChannelKind::Slack,
            settings: Some(
                json!({"mode": "socket", "engagement": {"channel_posts": {"allow": []}}}),
            ),
            auth: None,
            routes: Vec::new(),
            events: Default::default(),
            max_body: None,
            state: None,
        };
        let d = pack_diagnostics(&channel, source);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].line, Some(5));
        assert!(d[0].message.contains("no wildcard"), "{}", d[0].message);
        assert!(d[0].hint.is_some());
        let bad = Channel {
            settings: Some(
                json!({"mode": "http", "rules": [{"event": "app_mentoin", "skip": true}]}),
            ),
            ..channel
        };
        let source =
            "kind = \"slack\"\nmode = \"http\"\n[[rules]]\nevent = \"app_mentoin\"\nskip = true\n";
        let d = pack_diagnostics(&bad, source);
        let text: Vec<String> = d
            .iter()
            .map(|d| format!("{:?} {}", d.line, d.message))
            .collect();
        assert!(
            text.iter()
                .any(|t| t.starts_with("Some(2)") && t.contains("unknown variant `http`")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with("Some(4)") && t.contains("never sends")),
            "{text:?}"
        );
    }

    #[test]
    fn a_pack_message_is_placed_at_the_first_key_it_names() {
        let p = serde_problem(
            None,
            "credentials are half set: `app_id` needs `private_key`",
            "GitHub",
            Some(&json!({"app_id": 1})),
        );
        assert_eq!(p.key.as_deref(), Some("app_id"));
        let src = "kind = \"github\"\napp_id = 1\n";
        assert_eq!(locate(src, None, p.key.as_deref()).unwrap().line, 2);
    }
}
