//! What the webhook packs (GitHub, GitLab, Bitbucket) share, so each pack
//! is only its provider's headers, payload shapes and API: the dispatch
//! rules (event, actions and payload conditions → a model turn, a host
//! task or a skip) and their checks, the default auth chain (the
//! provider's signature or token when a secret is set, loopback only
//! otherwise), durable delivery-id deduplication (this host's log, or the
//! `DeliveryLedger` hosts share), host tasks answered with
//! 202 at once, model turns as the actor with templated message,
//! continuation and title, and following a turn to its outcome for the
//! progress surfaces and reply comments.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use agentkit_auth::{AuthContext, Chain, Policy, PrincipalType, Surface};
use agentkit_manifest::Admission;
use agentkit_protocol::api::{ForgePackInfo, PackInfo};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{ChannelResponse, ChannelSession, HandlerArgs, SendOptions, TurnReply};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::template::{render, render_value};

/// One dispatch rule; the first rule that matches a delivery decides.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rule {
    /// The provider's event name (`pull_request`, `merge_request`,
    /// `pullrequest:created`, ...) or `*`.
    pub(crate) event: String,
    /// The delivery's actions that match (any when empty).
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
    /// Template over the delivery's context.
    #[serde(default)]
    pub(crate) message: Option<String>,
    /// Template; each pack has a default (`pr:<repo>#<n>`, ...).
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
    /// Host variables the command sees beyond the scrubbed environment
    /// (`PATH`, `HOME`, ...), by name.
    #[serde(default)]
    pub(crate) env: Vec<String>,
}

/// `NAME`, `LEDGER_PATH`: what a tool's or task's `env` may list.
fn is_env_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Every rule has exactly one outcome, and its templates compile.
pub(crate) fn check_rules(rules: &[Rule]) -> std::result::Result<(), String> {
    for (i, r) in rules.iter().enumerate() {
        check_rule(i, r).map_err(|(_, message)| message)?;
    }
    Ok(())
}

/// One rule's problem: the key it is about (`turn.message`, ...) when
/// there is one, and the message.
pub(crate) fn check_rule(
    i: usize,
    r: &Rule,
) -> std::result::Result<(), (Option<&'static str>, String)> {
    let n = [r.turn.is_some(), r.task.is_some(), r.skip]
        .iter()
        .filter(|b| **b)
        .count();
    if n != 1 {
        return Err((
            None,
            format!(
                "rules[{i}] (event `{}`) needs exactly one of `turn`, `task` or `skip = true`",
                r.event
            ),
        ));
    }
    if let Some(t) = &r.task
        && t.command.is_some() == t.tool.is_some()
    {
        return Err((
            Some("task"),
            format!("rules[{i}].task needs exactly one of `command` or `tool`"),
        ));
    }
    if let Some(t) = &r.task
        && t.command.as_ref().is_some_and(Vec::is_empty)
    {
        return Err((Some("command"), format!("rules[{i}].task.command is empty")));
    }
    if let Some(t) = &r.task {
        if t.tool.is_some() && !t.env.is_empty() {
            return Err((
                Some("env"),
                format!(
                    "rules[{i}].task.env applies to `command` only (a tool lists its own `env`)"
                ),
            ));
        }
        if let Some(bad) = t.env.iter().find(|name| !is_env_name(name)) {
            return Err((
                Some("env"),
                format!("rules[{i}].task.env entry `{bad}` is not an environment variable name"),
            ));
        }
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
                .map_err(|e| (Some(field), format!("rules[{i}].turn.{field}: {e}")))?;
        }
    }
    Ok(())
}

/// The value at a dotted path (`pull_request.head.sha`).
pub(crate) fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// The string at a dotted path, or `""`.
pub(crate) fn text<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

impl Rule {
    /// Matches when the rule's event is `*` or one of `events`, the action
    /// is listed (or none are), and every condition holds.
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

/// The settings of a pack that answers with a reply comment (GitLab,
/// Bitbucket); unknown keys are errors.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplySettings {
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Checks deliveries (the provider's token or signature header).
    #[serde(default)]
    pub(crate) webhook_secret: Option<String>,
    /// The provider's REST base; each pack has its default.
    #[serde(default)]
    pub(crate) api_url: Option<String>,
    /// The API token; each pack has its default variable.
    #[serde(default)]
    pub(crate) token: Option<String>,
    /// The bot's username: its own activity never starts a turn.
    #[serde(default)]
    pub(crate) bot_name: Option<String>,
    /// Post the turn's final text as a comment (default true).
    #[serde(default)]
    pub(crate) reply: Option<bool>,
    #[serde(default)]
    pub(crate) events: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) rules: Vec<Rule>,
}

impl ReplySettings {
    /// The settings as serving reads them (and `validate` checks them).
    pub(crate) fn parse(value: &Value) -> std::result::Result<ReplySettings, String> {
        let s: ReplySettings = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        check_rules(&s.rules)?;
        Ok(s)
    }

    /// A channel file's settings, or its configuration error.
    pub(crate) fn of(channel: &agentkit_manifest::Channel) -> Result<ReplySettings> {
        ReplySettings::parse(channel.settings.as_ref().unwrap_or(&json!({}))).map_err(|message| {
            Error::Config {
                channel: channel.id.clone(),
                message,
            }
        })
    }
}

/// The webhook secret a pack checks, resolved; warns when it is set but
/// resolves to nothing (then only loopback deliveries are admitted).
pub(crate) fn webhook_secret(
    env: &Env,
    setting: Option<&str>,
    channel: &str,
    label: &str,
) -> Option<String> {
    let secret = resolve(env, setting);
    if setting.is_some() && secret.is_none() {
        tracing::warn!(channel = %channel, "the {label} webhook secret resolves to nothing: only loopback deliveries are admitted");
    }
    secret
}

/// The events a pack channel publishes: its `events` setting, or its
/// rules' events in order.
pub(crate) fn published_events(events: Option<&Vec<String>>, rules: &[Rule]) -> Vec<String> {
    if let Some(e) = events {
        return e.clone();
    }
    let mut out: Vec<String> = Vec::new();
    for r in rules {
        if !out.contains(&r.event) {
            out.push(r.event.clone());
        }
    }
    out
}

/// A `${VAR}` setting resolved; `None` when unset or empty.
pub(crate) fn resolve(env: &Env, setting: Option<&str>) -> Option<String> {
    setting.map(|s| env.resolve(s)).filter(|s| !s.is_empty())
}

/// The pack's chain when the file has no `auth` of its own: the
/// provider's check when a secret is set; loopback only otherwise (any
/// loopback peer under `--dev`, the strict local rule without it).
pub(crate) fn default_chain(authored: Option<Chain>, check: Option<Policy>, dev: bool) -> Chain {
    authored.unwrap_or_else(|| {
        let signed = check.is_some();
        let mut policies: Vec<Policy> = check.into_iter().collect();
        if dev {
            policies.push(Policy::LoopbackOnly);
        } else if !signed {
            policies.push(Policy::LocalDevStrict);
        }
        Chain::new(policies, Surface::CustomChannel)
    })
}

/// A JSON answer.
pub(crate) fn ok(status: u16, body: Value) -> Result<ChannelResponse> {
    Ok(ChannelResponse::json(status, body))
}

/// `200 {ok, skipped, reason}`.
pub(crate) fn skipped(reason: &str) -> Result<ChannelResponse> {
    ok(200, json!({"ok": true, "skipped": true, "reason": reason}))
}

/// A delivery as the shared dispatch sees it.
#[derive(Debug)]
pub(crate) struct Delivery<'a> {
    /// The names a rule's `event` may match (the first is the canonical
    /// one, reported back and given to host tasks).
    pub(crate) events: Vec<&'a str>,
    pub(crate) action: &'a str,
    /// The delivery id (for host tasks; dedup happens before).
    pub(crate) id: Option<&'a str>,
    /// What conditions and templates read.
    pub(crate) ctx: &'a Value,
    /// What a host command gets on stdin: the raw payload.
    pub(crate) payload: &'a Value,
}

/// What the first matching rule decided.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Answered already (no rule, a skip rule, a host task).
    Answered(Result<ChannelResponse>),
    /// A model turn.
    Turn(TurnRule),
}

/// The defaults of a turn when the rule's templates are absent.
#[derive(Debug, Default)]
pub(crate) struct TurnDefaults {
    pub(crate) message: String,
    pub(crate) continuation: Option<String>,
    pub(crate) title: Option<String>,
}

/// How many delivery ids a pack channel remembers: the newest ones.
/// Providers redeliver within minutes (Slack) or when a person asks
/// (GitHub's "Redeliver"); a redelivery older than this many later
/// deliveries would run again. Memory and the log stay bounded.
pub(crate) const MAX_SEEN: usize = 100_000;

/// The delivery ids seen (oldest first in `order`), and the open log they
/// are appended to.
#[derive(Debug)]
struct Seen {
    ids: HashSet<String>,
    order: VecDeque<String>,
    /// Lines in the log file (it is rewritten with the newest
    /// [`MAX_SEEN`] ids once it holds twice that).
    logged: usize,
    log: Option<std::fs::File>,
}

impl Seen {
    fn remember(&mut self, id: String) {
        if self.ids.insert(id.clone()) {
            self.order.push_back(id);
        }
        while self.order.len() > MAX_SEEN {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
    }
}

/// Rewrites the log with `ids` (temporary file, then rename).
fn rewrite_log(path: &Path, ids: &VecDeque<String>) -> std::io::Result<()> {
    let tmp = path.with_extension("log.tmp");
    let mut text = String::with_capacity(ids.iter().map(|i| i.len() + 1).sum());
    for id in ids {
        text.push_str(id);
        text.push('\n');
    }
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// The shared state of one pack channel.
#[derive(Debug)]
pub(crate) struct PackCore {
    /// `github`, `gitlab`, `bitbucket`: the principal prefix, the host
    /// task's environment (`AGENTKIT_<NAME>_EVENT`), the dedup log's name.
    pub(crate) name: &'static str,
    /// `GitHub`, ...: for logs.
    pub(crate) label: &'static str,
    seen: Mutex<Seen>,
    seen_path: PathBuf,
    agent_dir: PathBuf,
    /// The channel's id, for the shared ledger.
    channel: String,
    /// The ledger hosts share, instead of `seen`, when there is one.
    ledger: Option<std::sync::Arc<dyn crate::api::DeliveryLedger>>,
}

impl PackCore {
    /// Loads the channel's delivery log
    /// (`<state>/channels/<id>/<name>-deliveries.log`).
    pub(crate) fn new(
        name: &'static str,
        label: &'static str,
        state_dir: &Path,
        channel: &str,
        agent_dir: &Path,
        ledger: Option<std::sync::Arc<dyn crate::api::DeliveryLedger>>,
    ) -> PackCore {
        let seen_path = state_dir
            .join("channels")
            .join(channel)
            .join(format!("{name}-deliveries.log"));
        let text = std::fs::read_to_string(&seen_path).unwrap_or_default();
        let mut seen = Seen {
            ids: HashSet::new(),
            order: VecDeque::new(),
            logged: 0,
            log: None,
        };
        for line in text.lines().filter(|l| !l.is_empty()) {
            seen.logged += 1;
            seen.remember(line.to_owned());
        }
        if seen.logged > seen.order.len() {
            match rewrite_log(&seen_path, &seen.order) {
                Ok(()) => seen.logged = seen.order.len(),
                Err(e) => {
                    tracing::warn!(path = %seen_path.display(), error = %e, "cannot compact the delivery log")
                }
            }
        }
        PackCore {
            name,
            label,
            seen: Mutex::new(seen),
            seen_path,
            agent_dir: agent_dir.to_path_buf(),
            channel: channel.to_owned(),
            ledger,
        }
    }

    /// Records a delivery id; false when it was already seen. Durable: the
    /// id is appended to the log before the delivery is acted on.
    pub(crate) fn first_delivery(&self, id: &str) -> Result<bool> {
        if let Some(ledger) = &self.ledger {
            return self.first_in_ledger(ledger.as_ref(), id);
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.ids.contains(id) {
            return Ok(false);
        }
        // The log stays open between deliveries: one `write` per delivery
        // instead of a directory check, an open and a close. An id is kept
        // only once it is written, so a failed write is retried by the
        // redelivery.
        if seen.logged >= 2 * MAX_SEEN {
            // Only the newest ids are remembered: drop the rest from disk.
            seen.log = None;
            match rewrite_log(&self.seen_path, &seen.order) {
                Ok(()) => seen.logged = seen.order.len(),
                Err(e) => return Err(Error::io("compact", &self.seen_path, e)),
            }
        }
        let Seen { log, .. } = &mut *seen;
        let write = |log: &mut Option<std::fs::File>| -> std::io::Result<()> {
            let file = match log {
                Some(f) => f,
                None => {
                    if let Some(dir) = self.seen_path.parent() {
                        std::fs::create_dir_all(dir)?;
                    }
                    log.insert(
                        std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(&self.seen_path)?,
                    )
                }
            };
            file.write_all(format!("{id}\n").as_bytes())
        };
        if let Err(e) = write(log) {
            *log = None;
            return Err(Error::io("write", &self.seen_path, e));
        }
        seen.logged += 1;
        seen.remember(id.to_owned());
        Ok(true)
    }

    /// [`first_delivery`](Self::first_delivery) in the shared ledger, from
    /// the synchronous delivery path (tokio's multi-threaded runtime, on
    /// which the server runs, lets it wait in place).
    fn first_in_ledger(&self, ledger: &dyn crate::api::DeliveryLedger, id: &str) -> Result<bool> {
        let unavailable = |why: String| Error::NotAvailable {
            what: format!("the shared delivery ledger: {why}"),
        };
        let handle =
            tokio::runtime::Handle::try_current().map_err(|e| unavailable(e.to_string()))?;
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err(unavailable("it needs the multi-threaded runtime".into()));
        }
        tokio::task::block_in_place(|| {
            handle.block_on(ledger.first_delivery(&self.channel, self.name, id))
        })
        .map_err(unavailable)
    }

    /// `Some(200 {duplicate})` when this delivery id was seen before.
    pub(crate) fn redelivery(&self, id: Option<&str>) -> Result<Option<ChannelResponse>> {
        match id {
            Some(id) if !self.first_delivery(id)? => {
                tracing::info!(delivery = %id, pack = self.label, "ignoring a redelivery");
                Ok(Some(ChannelResponse::json(
                    200,
                    json!({"ok": true, "duplicate": true, "delivery": id}),
                )))
            }
            _ => Ok(None),
        }
    }

    /// Picks the first matching rule and runs it when it is a skip or a
    /// host task.
    pub(crate) fn decide(&self, args: &HandlerArgs, rules: &[Rule], d: &Delivery<'_>) -> Decision {
        let Some(rule) = rules
            .iter()
            .find(|r| r.matches_with(&d.events, d.action, d.ctx))
        else {
            return Decision::Answered(skipped("no rule matches"));
        };
        if rule.skip {
            return Decision::Answered(skipped("rule"));
        }
        if let Some(task) = &rule.task {
            return Decision::Answered(self.task(args, task, d));
        }
        Decision::Turn(rule.turn.clone().unwrap_or_default())
    }

    fn task(
        &self,
        args: &HandlerArgs,
        task: &TaskRule,
        d: &Delivery<'_>,
    ) -> Result<ChannelResponse> {
        let label = self.label;
        if let Some(tool) = &task.tool {
            let input = render_value(
                "task.input",
                task.input.as_ref().unwrap_or(&json!({})),
                d.ctx,
            )?;
            let c = args.ctx.clone();
            let tool = tool.clone();
            let reported = tool.clone();
            args.ctx.wait_until(async move {
                match c.call_tool(&tool, input, None).await {
                    Ok(env) => tracing::info!(tool = %tool, is_error = ?env.get("isError"), "{label} host task finished"),
                    Err(e) => tracing::warn!(tool = %tool, error = %e, "{label} host task failed"),
                }
            });
            return ok(202, json!({"ok": true, "task": "tool", "tool": reported}));
        }
        let Some(command) = task.command.clone() else {
            return Err(Error::bad_request("the task has no command"));
        };
        let pass_env = task.env.clone();
        let payload = serde_json::to_vec(d.payload).unwrap_or_default();
        let cwd = self.agent_dir.clone();
        let event = d.events.first().copied().unwrap_or("").to_owned();
        let delivery = d.id.unwrap_or("").to_owned();
        let prefix = format!("AGENTKIT_{}", self.name.to_ascii_uppercase());
        args.ctx.wait_until(async move {
            let vars = [
                (format!("{prefix}_EVENT"), event),
                (format!("{prefix}_DELIVERY"), delivery),
            ];
            if let Err(e) = run_command(&command, &cwd, &payload, &pass_env, &vars, label).await {
                tracing::warn!(command = ?command, error = %e, "{label} host task failed");
            }
        });
        ok(202, json!({"ok": true, "task": "command"}))
    }

    /// Starts (or continues) the turn a rule asked for, as the actor
    /// (`<name>:<actor>`); the admitting policy stays the authenticator.
    pub(crate) async fn start_turn(
        &self,
        args: &HandlerArgs,
        turn: &TurnRule,
        ctx: &Value,
        defaults: TurnDefaults,
        actor: &str,
        attributes: &[(&str, &str)],
    ) -> Result<ChannelSession> {
        let message = match &turn.message {
            Some(t) => render("turn.message", t, ctx)?,
            None => defaults.message,
        };
        let continuation = match &turn.continuation {
            Some(t) => Some(render("turn.continuation", t, ctx)?).filter(|s| !s.trim().is_empty()),
            None => defaults.continuation,
        };
        let title = match &turn.title {
            Some(t) => Some(render("turn.title", t, ctx)?),
            None => defaults.title,
        };
        let mut auth = AuthContext::new(
            args.auth.authenticator.clone(),
            format!(
                "{}:{}",
                self.name,
                if actor.is_empty() { "unknown" } else { actor }
            ),
            PrincipalType::User,
        );
        for (k, v) in attributes {
            auth = auth.with_attribute(*k, *v);
        }
        args.ctx
            .send(
                message,
                SendOptions {
                    continuation_token: continuation,
                    admission: turn.admission.unwrap_or_default(),
                    title,
                    ..SendOptions::default()
                },
                &auth,
            )
            .await
    }

    /// Runs `then` with the outcome of the turn `session` started, after
    /// the response (progress surfaces, reply comments). Gives up after
    /// six hours.
    pub(crate) fn after_turn<F, Fut>(&self, args: &HandlerArgs, session: &ChannelSession, then: F)
    where
        F: FnOnce(TurnReply) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let c = args.ctx.clone();
        let (id, start) = (session.id.clone(), session.start_index);
        args.ctx.wait_until(async move {
            if let Some(reply) = turn_result(&c, &id, start).await {
                then(reply).await;
            }
        });
    }
}

/// How the turn that starts at `start` in session `id` ended; `None` when
/// the host stopped first or it ran past six hours.
pub(crate) async fn turn_result(
    ctx: &crate::api::ChannelContext,
    id: &str,
    start: u64,
) -> Option<TurnReply> {
    let events = ctx.follow(id, start).await.ok()?;
    tokio::time::timeout(
        Duration::from_secs(6 * 3600),
        crate::api::turn_outcome(events),
    )
    .await
    .ok()
    .flatten()
}

/// `202 {ok, event, sessionId, continuationToken, isNew}`.
pub(crate) fn accepted(event: &str, session: &ChannelSession) -> Result<ChannelResponse> {
    let mut body = json!({"ok": true, "event": event});
    if let (Some(obj), Value::Object(s)) = (
        body.as_object_mut(),
        serde_json::to_value(session).unwrap_or(Value::Null),
    ) {
        obj.extend(s);
    }
    ok(202, body)
}

/// How long a host task's command may run.
const TASK_TIMEOUT: Duration = Duration::from_secs(600);

/// How much of a host task's stdout and stderr is kept (for the log).
const TASK_OUTPUT_CAP: usize = 64 * 1024;

/// Runs a host command in `cwd` with the payload on stdin, through the
/// one child-process runner (`agentkit_plumbing`): the scrubbed
/// environment plus the task's `env` names and `vars`, its own process
/// group (killed when it ends, at the timeout, or when the server drops
/// the task), output capped.
pub(crate) async fn run_command(
    command: &[String],
    cwd: &Path,
    payload: &[u8],
    pass_env: &[String],
    vars: &[(String, String)],
    label: &str,
) -> Result<()> {
    let spec = task_spec(command, cwd, payload, pass_env, vars)?;
    let program = command.first().map(String::as_str).unwrap_or_default();
    let outcome = agentkit_plumbing::run_child(&spec)
        .await
        .map_err(|e| Error::io("spawn", Path::new(program), e))?;
    if outcome.success() {
        tracing::info!(program, "{label} host task finished");
        Ok(())
    } else {
        Err(Error::Upstream {
            message: format!(
                "`{program}` {}",
                outcome.describe().chars().take(500).collect::<String>()
            ),
        })
    }
}

fn task_spec(
    command: &[String],
    cwd: &Path,
    payload: &[u8],
    pass_env: &[String],
    vars: &[(String, String)],
) -> Result<agentkit_plumbing::ChildSpec> {
    let Some((program, rest)) = command.split_first() else {
        return Err(Error::bad_request("empty command"));
    };
    Ok(agentkit_plumbing::ChildSpec::new(program)
        .args(rest)
        .cwd(cwd)
        .stdin(payload.to_vec())
        .pass_env(pass_env.iter().cloned())
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .timeout(TASK_TIMEOUT)
        .stdout_cap(TASK_OUTPUT_CAP)
        .stderr_cap(TASK_OUTPUT_CAP))
}

/// A JSON POST to a provider API (reply comments), with one auth header.
pub(crate) async fn post_json(
    label: &str,
    url: &str,
    auth: Option<(&str, String)>,
    body: &Value,
) -> Result<Value> {
    let shown = agentkit_plumbing::redact_credentials(url);
    let mut req = crate::deliver::request(reqwest::Method::POST, url)?.json(body);
    if let Some((name, value)) = auth {
        req = req.header(name, value);
    }
    let resp = req.send().await.map_err(|e| Error::Upstream {
        message: format!(
            "{label} API POST {shown}: {}",
            agentkit_plumbing::http_error_text(e)
        ),
    })?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(Error::Upstream {
            message: format!(
                "{label} API POST {shown}: HTTP {}: {}",
                status.as_u16(),
                text.chars().take(200).collect::<String>()
            ),
        });
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The headers the chain's signature and shared-secret policies read.
pub(crate) fn signature_headers(chain: &Chain) -> Vec<String> {
    chain
        .policies
        .iter()
        .filter_map(|p| match p {
            Policy::HmacSignature { header, .. } | Policy::SharedSecret { header, .. } => {
                Some(header.to_ascii_lowercase())
            }
            Policy::SlackSignature { .. } => Some("x-slack-signature".to_owned()),
            _ => None,
        })
        .collect()
}

/// The body limit of a pack channel unless its file sets `max_body`:
/// GitHub sends deliveries of up to 25 MB, and the other providers'
/// payloads are bounded by theirs.
pub(crate) const PACK_MAX_BODY: usize = 25 * 1024 * 1024;

/// A pack channel's body limit: its file's `max_body`, else
/// [`PACK_MAX_BODY`].
pub(crate) fn pack_max_body(channel: &agentkit_manifest::Channel) -> usize {
    channel
        .max_body
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(PACK_MAX_BODY)
}

/// What a pack's channel definition is built from.
pub(crate) struct PackSpec<'a> {
    /// `github`, `gitlab`, `bitbucket`.
    pub(crate) kind: &'a str,
    /// `GitHub`, ...
    pub(crate) label: &'a str,
    pub(crate) channel: &'a agentkit_manifest::Channel,
    pub(crate) description: Option<String>,
    pub(crate) chain: Chain,
    pub(crate) events: Vec<String>,
    pub(crate) signed: bool,
    pub(crate) api_url: &'a str,
    /// How a form-encoded delivery is read.
    pub(crate) form_bodies: crate::api::FormBodies,
}

/// A pack's channel definition: `kind`, the channel's description and
/// auth chain, `webhookEvents` / `signed` / `apiUrl` in `/v1/info`, its
/// body limit, and one `POST /` route handing each delivery to `handle`.
/// Wrongly signed deliveries are refused, even on loopback under `--dev`,
/// before their body is parsed (see [`signature_headers`]).
pub(crate) fn pack_definition<F, Fut>(
    spec: PackSpec<'_>,
    handle: F,
) -> crate::api::ChannelDefinition
where
    F: Fn(HandlerArgs) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ChannelResponse>> + Send + 'static,
{
    let mut def = crate::api::ChannelDefinition::new(spec.channel.id.clone());
    def.kind = spec.kind.to_owned();
    def.description = spec.description;
    def.signature_headers = signature_headers(&spec.chain);
    def.auth = Some(spec.chain);
    def.info = Some(PackInfo::Forge(ForgePackInfo {
        webhook_events: spec.events,
        signed: spec.signed,
        api_url: spec.api_url.to_owned(),
    }));
    def.max_body = Some(pack_max_body(spec.channel));
    def.form_bodies = spec.form_bodies;
    def.routes.push(
        crate::api::RouteDef::new(agentkit_manifest::Method::Post, "/", handle)
            .body_schema(json!({"type": "object"}))
            .description(format!("{} webhook deliveries", spec.label)),
    );
    def
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rule(v: Value) -> Rule {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn rules_match_event_action_and_conditions_and_need_one_outcome() {
        let r = rule(
            json!({"event": "pull_request", "actions": ["opened"], "when": {"pull_request.draft": false}, "turn": {}}),
        );
        let pr = json!({"pull_request": {"draft": false}});
        assert!(r.matches_with(&["pull_request"], "opened", &pr));
        assert!(r.matches_with(&["pullrequest:created", "pull_request"], "opened", &pr));
        assert!(!r.matches_with(&["pull_request"], "closed", &pr));
        assert!(!r.matches_with(
            &["pull_request"],
            "opened",
            &json!({"pull_request": {"draft": true}})
        ));
        assert!(rule(json!({"event": "*", "skip": true})).matches_with(&["x"], "", &json!({})));
        assert!(check_rules(&[rule(json!({"event": "x"}))]).is_err());
        assert!(
            check_rules(&[rule(
                json!({"event": "x", "task": {"tool": "a", "command": ["b"]}})
            )])
            .is_err()
        );
        assert!(
            check_rules(&[rule(json!({"event": "x", "turn": {"message": "{{ x"}}))])
                .unwrap_err()
                .contains("rules[0].turn.message")
        );
        assert_eq!(
            published_events(
                None,
                &[r.clone(), r, rule(json!({"event": "*", "skip": true}))]
            ),
            ["pull_request", "*"]
        );
    }

    #[test]
    fn the_delivery_log_keeps_the_newest_ids_only() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("channels/c/slack-deliveries.log");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let ids: Vec<String> = (0..2 * MAX_SEEN + 10).map(|i| format!("Ev{i}")).collect();
        std::fs::write(&log, ids.join("\n") + "\n").unwrap();
        let lines = |p: &Path| std::fs::read_to_string(p).unwrap().lines().count();
        // Loading compacts the log to the newest MAX_SEEN ids.
        let core = PackCore::new("slack", "Slack", dir.path(), "c", dir.path(), None);
        assert_eq!(lines(&log), MAX_SEEN);
        assert!(!core.first_delivery(ids.last().unwrap()).unwrap());
        assert!(!core.first_delivery(&ids[ids.len() - MAX_SEEN]).unwrap());
        // The oldest are forgotten (a redelivery that old runs again).
        assert!(core.first_delivery(&ids[0]).unwrap());
        // Appending rewrites the log once it holds twice the bound.
        for i in 0..MAX_SEEN {
            assert!(core.first_delivery(&format!("New{i}")).unwrap());
        }
        // The last of those found 2 × MAX_SEEN lines and compacted first.
        assert_eq!(lines(&log), MAX_SEEN + 1);
        assert!(core.first_delivery("one more").unwrap());
        assert_eq!(lines(&log), MAX_SEEN + 2);
        let seen = core.seen.lock().unwrap();
        assert_eq!(seen.ids.len(), MAX_SEEN);
        assert_eq!(seen.order.len(), MAX_SEEN);
        drop(seen);
        // A restart remembers what the compacted log holds.
        let again = PackCore::new("slack", "Slack", dir.path(), "c", dir.path(), None);
        assert!(!again.first_delivery("one more").unwrap());
        assert!(
            !again
                .first_delivery(&format!("New{}", MAX_SEEN - 1))
                .unwrap()
        );
    }

    #[test]
    fn deliveries_are_deduplicated_durably() {
        let dir = tempfile::tempdir().unwrap();
        let core = || PackCore::new("gitlab", "GitLab", dir.path(), "c", dir.path(), None);
        let a = core();
        assert!(a.first_delivery("u-1").unwrap());
        assert!(!a.first_delivery("u-1").unwrap());
        assert!(a.redelivery(Some("u-2")).unwrap().is_none());
        let b = core();
        assert_eq!(b.redelivery(Some("u-2")).unwrap().unwrap().status, 200);
        assert!(b.redelivery(None).unwrap().is_none());
        assert!(
            dir.path()
                .join("channels/c/gitlab-deliveries.log")
                .is_file()
        );
    }

    #[test]
    fn task_env_lists_variable_names_for_commands_only() {
        let ok =
            rule(json!({"event": "x", "task": {"command": ["b"], "env": ["GITHUB_TOKEN", "A_1"]}}));
        assert!(check_rules(&[ok]).is_ok());
        let err = check_rule(
            0,
            &rule(json!({"event": "x", "task": {"command": ["b"], "env": ["NOT-A-NAME"]}})),
        )
        .unwrap_err();
        assert_eq!(err.0, Some("env"));
        assert!(err.1.contains("`NOT-A-NAME`"), "{}", err.1);
        let err = check_rule(
            0,
            &rule(json!({"event": "x", "task": {"tool": "t", "env": ["A"]}})),
        )
        .unwrap_err();
        assert_eq!(err.0, Some("env"));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn host_tasks_do_not_see_the_hosts_secrets() {
        use agentkit_test_support::rerun::{PASSED, SECRET, rerun_with_env};
        if !rerun_with_env(
            module_path!(),
            "host_tasks_do_not_see_the_hosts_secrets",
            &[],
        ) {
            return;
        }
        assert_eq!(std::env::var(SECRET.0).as_deref(), Ok(SECRET.1));
        let dir = tempfile::tempdir().unwrap();
        // A flood of output is capped, not a failure.
        let command = [
            "sh".to_owned(),
            "-c".to_owned(),
            "cat > payload.json; env > env.txt; head -c 1000000 /dev/zero".to_owned(),
        ];
        let vars = [("AGENTKIT_GITHUB_EVENT".to_owned(), "push".to_owned())];
        run_command(
            &command,
            dir.path(),
            b"{\"a\":1}",
            &[PASSED.0.to_owned()],
            &vars,
            "GitHub",
        )
        .await
        .unwrap();
        let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
        assert!(
            env.contains(&format!("{}={}\n", PASSED.0, PASSED.1)),
            "{env}"
        );
        assert!(env.contains("AGENTKIT_GITHUB_EVENT=push\n"), "{env}");
        assert!(!env.contains(SECRET.0), "{env}");
        assert!(!env.contains(SECRET.1), "{env}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("payload.json")).unwrap(),
            "{\"a\":1}"
        );
        let err = run_command(
            &[
                "sh".to_owned(),
                "-c".to_owned(),
                "echo bad >&2; exit 2".to_owned(),
            ],
            dir.path(),
            b"",
            &[],
            &[],
            "GitHub",
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string().contains("`sh` exited with status 2: bad"),
            "{err}"
        );
    }
}
