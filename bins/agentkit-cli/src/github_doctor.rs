//! `agentkit github doctor [--install]`: checks a GitHub channel's API
//! credentials and the repository webhook that feeds it (URL, secret,
//! content type, events) through the REST API at the channel's `api_url`,
//! and with `--install` creates or repairs the hook.

use std::path::{Path, PathBuf};

use agentkit::EnvLookup;
use agentkit::channels::GithubClient;
use agentkit::manifest::ChannelKind;
use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};

/// What `github doctor` was asked for.
pub(crate) struct DoctorRequest {
    pub(crate) dir: PathBuf,
    pub(crate) repo: String,
    /// The server's public base URL; the hook's URL is
    /// `<url>/<slug>/v1/channels/<id>`.
    pub(crate) url: Option<String>,
    pub(crate) channel: Option<String>,
    pub(crate) install: bool,
}

/// One check: what was found, and what to do when it fails.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) ok: bool,
    pub(crate) detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fix: Option<String>,
}

/// The report for one GitHub channel.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DoctorReport {
    pub(crate) slug: String,
    pub(crate) channel: String,
    pub(crate) repo: String,
    pub(crate) checks: Vec<Check>,
    /// What `--install` changed (`created hook 1`, `updated hook 1`).
    pub(crate) installed: Vec<String>,
}

impl DoctorReport {
    pub(crate) fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

fn check(name: &'static str, ok: bool, detail: String, fix: Option<String>) -> Check {
    Check {
        name,
        ok,
        detail,
        fix: if ok { None } else { fix },
    }
}

/// The channel `doctor` is about: its agent's slug, its id, its events,
/// its API client and its webhook secret (resolved, never printed).
struct Target {
    slug: String,
    channel: String,
    events: Vec<String>,
    client: GithubClient,
    app: bool,
    secret: Option<String>,
}

fn target(dir: &Path, channel: Option<&str>, env: &EnvLookup) -> anyhow::Result<Target> {
    let found =
        agentkit::discover(dir).with_context(|| format!("cannot read `{}`", dir.display()))?;
    if found.diagnostics.has_errors() {
        bail!(
            "`{}` does not validate: run `agentkit validate`",
            dir.display()
        );
    }
    let mut matching = Vec::new();
    for project in &found.host.agents {
        for c in &project.agent.channels {
            if c.kind == ChannelKind::Github
                && channel.is_none_or(|want| c.id == want || project.slug == want)
            {
                matching.push((project, c));
            }
        }
    }
    let (project, c) = match matching.as_slice() {
        [one] => *one,
        [] => bail!("no `kind = \"github\"` channel under `{}`", dir.display()),
        _ => bail!("several GitHub channels here: name one with --channel (its id or agent slug)"),
    };
    let settings = c.settings.clone().unwrap_or(Value::Null);
    let text = |key: &str| settings.get(key).and_then(Value::as_str).map(str::to_owned);
    let secret = text("webhook_secret")
        .map(|s| env.resolve(&s))
        .filter(|s| !s.is_empty());
    let events = agentkit::webhooks::pack_targets(dir, agentkit::webhooks::Provider::Github)?
        .into_iter()
        .find(|t| t.slug == project.slug && t.channel == c.id)
        .map(|t| t.events)
        .unwrap_or_default();
    let client = agentkit::channels::github_client(c, env, &project.agent.dir)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Target {
        slug: project.slug.clone(),
        channel: c.id.clone(),
        events,
        client,
        app: settings.get("app_id").is_some(),
        secret,
    })
}

/// The events a hook must carry: the channel's, `*` when it takes every
/// event (or names none).
fn needed_events(events: &[String]) -> Vec<String> {
    if events.is_empty() || events.iter().any(|e| e == "*") {
        vec!["*".to_owned()]
    } else {
        events.to_vec()
    }
}

pub(crate) async fn doctor(req: &DoctorRequest, env: &EnvLookup) -> anyhow::Result<DoctorReport> {
    let t = target(&req.dir, req.channel.as_deref(), env)?;
    let repo = req.repo.as_str();
    let path = format!("/{}/v1/channels/{}", t.slug, t.channel);
    let want_url = req
        .url
        .as_ref()
        .map(|u| format!("{}{path}", u.trim_end_matches('/')));
    let mut checks = Vec::new();
    let mut installed = Vec::new();
    let report = |checks, installed| DoctorReport {
        slug: t.slug.clone(),
        channel: t.channel.clone(),
        repo: repo.to_owned(),
        checks,
        installed,
    };

    // Credentials: a token, or App credentials acting as an installation.
    if !t.client.has_credentials() {
        checks.push(check(
            "credentials",
            false,
            "no token or GitHub App credentials".into(),
            Some("set GITHUB_TOKEN (a token with admin rights on the repository), or `app_id` and `private_key` in the channel file".into()),
        ));
        return Ok(report(checks, installed));
    }
    let probe = if t.app {
        "/installation/repositories?per_page=100".to_owned()
    } else {
        format!("/repos/{repo}")
    };
    match t.client.request("GET", &probe, None).await {
        Ok(v) => {
            let admin = v.pointer("/permissions/admin").and_then(Value::as_bool);
            let detail = if t.app {
                "GitHub App installation token minted".to_owned()
            } else {
                format!("token reads {repo}")
            };
            checks.push(check("credentials", true, detail, None));
            if t.app {
                let names: Vec<&str> = v
                    .get("repositories")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|r| r.get("full_name").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                let found = names.iter().any(|n| n.eq_ignore_ascii_case(repo));
                // Past the first page, absence proves nothing: the hooks
                // call below answers for it.
                let total = v.get("total_count").and_then(Value::as_u64).unwrap_or(0);
                let partial = total > names.len() as u64;
                let covered = found || partial;
                checks.push(check(
                    "installation",
                    covered,
                    if found {
                        format!("the App's installation covers {repo}")
                    } else if partial {
                        format!("the App's installation has {total} repositories (not all listed)")
                    } else {
                        format!("the App's installation does not cover {repo}")
                    },
                    Some(format!("install the App on {repo} (its settings → Install App → Configure → Repository access)")),
                ));
                if !covered {
                    return Ok(report(checks, installed));
                }
            }
            if admin == Some(false) {
                checks.push(check(
                    "admin",
                    false,
                    format!("the token has no admin rights on {repo}"),
                    Some("webhooks need admin: use a token of a repository admin (or an App with `Repository webhooks: write`)".into()),
                ));
            }
        }
        Err(e) => {
            checks.push(check(
                "credentials",
                false,
                format!("GET {probe}: {e}"),
                Some(if t.app {
                    "check `app_id`, `private_key` and `installation_id`, and that the App is installed on the repository".into()
                } else {
                    format!("check the token (GITHUB_TOKEN / GH_TOKEN, or `token`) and its access to {repo}")
                }),
            ));
            return Ok(report(checks, installed));
        }
    }

    // The hook that points at the channel.
    let hooks_path = format!("/repos/{repo}/hooks");
    let hooks = match t.client.request("GET", &hooks_path, None).await {
        Ok(Value::Array(hooks)) => hooks,
        Ok(other) => bail!("GET {hooks_path}: not a list of hooks: {other}"),
        Err(e) => {
            checks.push(check(
                "webhook",
                false,
                format!("GET {hooks_path}: {e}"),
                Some("listing webhooks needs admin rights on the repository".into()),
            ));
            return Ok(report(checks, installed));
        }
    };
    let hook_url = |h: &Value| {
        h.pointer("/config/url")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let hook = hooks.iter().find(|h| {
        let u = hook_url(h);
        match &want_url {
            Some(w) => u.trim_end_matches('/') == w,
            None => u.trim_end_matches('/').ends_with(&path),
        }
    });
    let needed = needed_events(&t.events);

    if req.install {
        let Some(url) = &want_url else {
            bail!(
                "--install needs --url, the server's public base URL (the hook delivers to <URL>{path})"
            );
        };
        let Some(secret) = &t.secret else {
            bail!(
                "--install needs the channel's webhook secret: set `webhook_secret` in the channel file and its variable in the environment"
            );
        };
        let mut config = json!({"url": url, "content_type": "json", "insecure_ssl": "0"});
        config["secret"] = json!(secret);
        match hook {
            None => {
                let created = t
                    .client
                    .request(
                        "POST",
                        &hooks_path,
                        Some(json!({"name": "web", "active": true, "events": needed, "config": config})),
                    )
                    .await
                    .map_err(|e| anyhow::anyhow!("POST {hooks_path}: {e}"))?;
                installed.push(format!(
                    "created hook {} → {url}",
                    created.get("id").unwrap_or(&Value::Null)
                ));
            }
            Some(h) => {
                let id = h
                    .get("id")
                    .and_then(Value::as_u64)
                    .context("a hook without an id")?;
                let mut events: Vec<String> = h
                    .get("events")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                if needed.iter().any(|e| e == "*") {
                    events = needed.clone();
                } else if !events.iter().any(|e| e == "*") {
                    for e in &needed {
                        if !events.contains(e) {
                            events.push(e.clone());
                        }
                    }
                }
                t.client
                    .request(
                        "PATCH",
                        &format!("{hooks_path}/{id}"),
                        Some(json!({"active": true, "events": events, "config": config})),
                    )
                    .await
                    .map_err(|e| anyhow::anyhow!("PATCH {hooks_path}/{id}: {e}"))?;
                installed.push(format!("updated hook {id} → {url}"));
            }
        }
        // Report on what GitHub holds now.
        let again = Box::pin(doctor(
            &DoctorRequest {
                dir: req.dir.clone(),
                repo: req.repo.clone(),
                url: req.url.clone(),
                channel: req.channel.clone(),
                install: false,
            },
            env,
        ))
        .await?;
        return Ok(DoctorReport { installed, ..again });
    }

    let install_fix = |what: &str| {
        Some(format!(
            "{what}, or run `agentkit github doctor --install --url https://YOUR-HOST` to fix it through the API"
        ))
    };
    let Some(h) = hook else {
        checks.push(check(
            "webhook",
            false,
            match &want_url {
                Some(w) => format!("no hook of {repo} delivers to {w}"),
                None => format!("no hook of {repo} delivers to …{path}"),
            },
            install_fix("add one under the repository's Settings → Webhooks"),
        ));
        return Ok(report(checks, installed));
    };
    let id = h.get("id").cloned().unwrap_or(Value::Null);
    let active = h.get("active").and_then(Value::as_bool).unwrap_or(true);
    checks.push(check(
        "webhook",
        active,
        format!(
            "hook {id} delivers to {}{}",
            hook_url(h),
            if active { "" } else { " but is inactive" }
        ),
        install_fix("activate it"),
    ));
    let content_type = h
        .pointer("/config/content_type")
        .and_then(Value::as_str)
        .unwrap_or("form");
    checks.push(check(
        "content type",
        content_type == "json",
        format!("content_type = {content_type}"),
        install_fix("set Content type to application/json"),
    ));
    // GitHub answers a set secret as `********`: presence is all it shows.
    let hook_secret = h
        .pointer("/config/secret")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    let (ok, detail, fix) = match (hook_secret, t.secret.is_some()) {
        (true, true) => (true, "the hook signs deliveries and the channel verifies them (GitHub does not show the value: a mismatch shows as 401s in the hook's Recent Deliveries)".to_owned(), None),
        (false, true) => (false, "the channel verifies signatures but the hook sends none: every delivery is refused".to_owned(), install_fix("set the hook's Secret to the channel's webhook secret")),
        (true, false) => (false, "the hook signs deliveries but the channel's webhook secret is unset: only loopback deliveries are admitted".to_owned(), Some("set `webhook_secret = \"${GITHUB_WEBHOOK_SECRET}\"` in the channel file and the variable in the server's environment".to_owned())),
        (false, false) => (false, "neither the hook nor the channel has a webhook secret: deliveries are not verified".to_owned(), Some("set `webhook_secret` in the channel file, then run `agentkit github doctor --install`".to_owned())),
    };
    checks.push(check("secret", ok, detail, fix));
    let has: Vec<&str> = h
        .get("events")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let missing: Vec<&String> = needed
        .iter()
        .filter(|e| !has.contains(&"*") && !has.contains(&e.as_str()))
        .collect();
    checks.push(check(
        "events",
        missing.is_empty(),
        if missing.is_empty() {
            format!(
                "the hook sends {} (the channel needs {})",
                has.join(", "),
                needed.join(", ")
            )
        } else {
            format!(
                "the hook does not send {} (it sends {})",
                missing
                    .iter()
                    .map(|e| e.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                has.join(", ")
            )
        },
        install_fix("tick those events under the hook's \"Let me select individual events\""),
    ));
    Ok(report(checks, installed))
}
