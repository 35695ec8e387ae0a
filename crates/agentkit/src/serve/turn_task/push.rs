//! A2A push notifications: a client registers a webhook for one of its
//! tasks (`CreateTaskPushNotificationConfig`, or `SendMessage`'s
//! `configuration.taskPushNotificationConfig`) and the server POSTs the
//! task's changes to it as `StreamResponse` bodies: the task as it is when
//! the webhook is registered, then each status update (with the reply
//! artifact before the completed one) until the task ends. Pieces of the
//! reply are not pushed; a client that wants them streams.
//!
//! A webhook is called with `X-A2A-Notification-Token` (its `token`) and
//! `Authorization: <scheme> <credentials>` (its `authentication`), each
//! POST with a timeout, three tries and no redirect. Its URL is the
//! client's, so by default only public addresses are called: a name that
//! resolves only to loopback, private, link-local, shared or reserved
//! addresses (or such an address written out) is refused, at
//! registration and again at every call (`--a2a-push-private-networks`
//! lifts it, for a private network or tests).
//!
//! Configs are kept for a week in a store of their own (the agent's
//! state folder's `a2a-push/`, or its partition of the shared database),
//! never in the key-value store tools reach, since they hold the client's
//! credentials; those never reach a log line. The host that registered a
//! webhook follows its task. On one host, after a restart, it follows its
//! unfinished tasks again (a client may see the task's current state a
//! second time). On a shared database one host at a time follows a task,
//! by a claim row (`agentkit_pg::claim_push_follow`) that also records
//! how far the task's changes were pushed: when that host dies (a kill -9
//! included) another host claims the task within a few seconds and
//! pushes its changes from there, each once.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentkit_runtime::{AgentRuntime, KvStore, Owner, SharedBackend};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::task::{Change, TaskFold, TaskId};
use super::wire::StreamResponse;

/// Why a push request was refused, as the A2A front-end answers it.
#[derive(Debug)]
pub(crate) enum PushError {
    /// A bad config or request (`-32602`).
    Invalid(String),
    /// No such config (`-32001`).
    NotFound(String),
    /// Past a bound of this host (`-32004`).
    Unsupported(String),
    /// The store failed (`-32603`; the detail is logged).
    Internal(String),
}

impl PushError {
    fn invalid_params(message: impl Into<String>) -> PushError {
        PushError::Invalid(message.into())
    }
}

impl From<agentkit_runtime::Error> for PushError {
    fn from(e: agentkit_runtime::Error) -> PushError {
        PushError::Internal(e.to_string())
    }
}

type PushResult<T> = Result<T, PushError>;

/// Webhooks one task may have.
const CONFIGS_PER_TASK: usize = 10;
/// Tasks followed for webhooks at once, per agent on this host.
const WATCHED_MAX: usize = 1_000;
/// How long a config is kept after it is registered.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// One POST's timeout, and the waits before its second and third tries.
const POST_TIMEOUT: Duration = Duration::from_secs(10);
const RETRY_WAITS: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(2)];
/// How often a follower looks whether a message no turn took was dropped.
const IDLE_CHECK: Duration = Duration::from_millis(250);
/// The longest URL accepted.
const MAX_URL: usize = 2_048;
/// How long a follower's claim on a task lasts without a renewal, and
/// how often the claims are renewed and dead followers' tasks looked
/// for (on a shared database).
const CLAIM_TTL: Duration = Duration::from_secs(5);
const CLAIM_SWEEP: Duration = Duration::from_secs(1);
/// Tasks whose follower died claimed per sweep.
const CLAIMS_PER_SWEEP: i64 = 64;

/// `AuthenticationInfo`: how the webhook call authenticates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct AuthenticationInfo {
    pub(crate) scheme: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) credentials: String,
}

/// `TaskPushNotificationConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct PushConfig {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) tenant: String,
    pub(crate) id: String,
    pub(crate) task_id: String,
    pub(crate) url: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) authentication: Option<AuthenticationInfo>,
    /// Registered through A2A 0.3's methods: the webhook is sent 0.3's
    /// bodies (the task itself, at each change).
    #[serde(skip)]
    pub(crate) legacy: bool,
}

/// `GetTaskPushNotificationConfigRequest` and
/// `DeleteTaskPushNotificationConfigRequest`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ConfigRequest {
    pub(crate) task_id: String,
    pub(crate) id: String,
}

/// `ListTaskPushNotificationConfigsRequest`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ListConfigsRequest {
    pub(crate) task_id: String,
    pub(crate) page_size: Option<i64>,
    pub(crate) page_token: Option<String>,
}

/// A config as stored: with who registered it (whose view of the task
/// the follower reads).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    config: PushConfig,
    owner: Owner,
    /// The config's `legacy` (which its own serialization leaves out).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    legacy: bool,
}

/// One agent's webhooks and the tasks followed for them.
pub(crate) struct Pushes {
    /// Where the configs are kept (opened when first needed on one host).
    store: tokio::sync::OnceCell<KvStore>,
    opener: Opener,
    /// Built by the first push: its TLS roots take a few milliseconds to
    /// load, which a start should not spend on a webhook nobody set.
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
    private_ok: bool,
    watching: Mutex<HashSet<String>>,
    /// On a shared database: who follows which task.
    claims: Option<Claims>,
}

/// The claim rows of one agent's followed tasks on the shared database,
/// and this host's name in them.
struct Claims {
    db: agentkit_pg::Database,
    agent: String,
    holder: String,
}

impl std::fmt::Debug for Pushes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pushes")
            .field("private_ok", &self.private_ok)
            .finish_non_exhaustive()
    }
}

/// How the config store is opened.
enum Opener {
    /// `<agent state>/a2a-push/agentkit.sqlite`.
    Local(PathBuf),
    /// The shared database, opened at mount.
    Shared,
}

impl Pushes {
    /// The webhooks of the agent whose state folder is `state_dir`, kept
    /// on `database` when there is one.
    pub(crate) fn new(
        state_dir: &std::path::Path,
        slug: &str,
        database: Option<&agentkit_pg::PgBackend>,
        private_ok: bool,
    ) -> crate::error::Result<Pushes> {
        let dir = state_dir.join("a2a-push");
        let store = tokio::sync::OnceCell::new();
        let claims = database.map(|db| Claims {
            db: db.database().clone(),
            agent: slug.to_owned(),
            holder: db.owner().to_owned(),
        });
        let opener = match database {
            Some(db) => {
                // Its own partition (no agent slug has a `/`).
                let kv = KvStore::open(&dir)?.shared(db, &format!("{slug}/a2a-push"));
                let _ = store.set(kv);
                Opener::Shared
            }
            None => Opener::Local(dir),
        };
        Ok(Pushes {
            store,
            opener,
            client: std::sync::OnceLock::new(),
            private_ok,
            watching: Mutex::default(),
            claims,
        })
    }

    async fn store(&self) -> PushResult<&KvStore> {
        self.store
            .get_or_try_init(|| async {
                match &self.opener {
                    Opener::Local(dir) => {
                        let dir = dir.clone();
                        tokio::task::spawn_blocking(move || KvStore::open(&dir))
                            .await
                            .map_err(|e| {
                                PushError::Internal(format!("cannot open the push store: {e}"))
                            })?
                            .map_err(PushError::from)
                    }
                    Opener::Shared => {
                        Err(PushError::Internal("the push store is not open".to_owned()))
                    }
                }
            })
            .await
    }

    /// The configs of `task`.
    async fn configs(&self, task: &str) -> PushResult<Vec<Stored>> {
        let entries = self
            .store()
            .await?
            .list(&format!("{task}/"), CONFIGS_PER_TASK * 2)
            .await?;
        Ok(entries
            .into_iter()
            .filter_map(|e| serde_json::from_value(e.value).ok())
            .collect())
    }

    /// Checks a config before anything is done for it: its URL (see the
    /// module's notes), its authentication, token and id.
    pub(crate) async fn check(&self, config: &PushConfig) -> PushResult<()> {
        check_url(&config.url, self.private_ok).await?;
        if let Some(auth) = &config.authentication
            && (auth.scheme.trim().is_empty()
                || !auth
                    .scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                || auth.credentials.contains(['\r', '\n']))
        {
            return Err(PushError::invalid_params(
                "`authentication` needs a `scheme` (an HTTP authentication scheme such as `Bearer`) and `credentials` on one line",
            ));
        }
        if config.token.contains(['\r', '\n']) {
            return Err(PushError::invalid_params("`token` must be one line"));
        }
        if config.id.len() > 128 || config.id.contains('/') {
            return Err(PushError::invalid_params(
                "a config `id` is at most 128 characters, without `/`",
            ));
        }
        Ok(())
    }

    /// Registers `config` on `task` for `owner` (who may see the task)
    /// and follows the task; answers the config as stored.
    pub(crate) async fn create(
        self: &Arc<Self>,
        runtime: &AgentRuntime,
        owner: &Owner,
        task: &TaskFold,
        mut config: PushConfig,
        shutdown: &CancellationToken,
    ) -> PushResult<PushConfig> {
        let task_id = task.id().to_string();
        if !config.task_id.is_empty() && config.task_id != task_id {
            return Err(PushError::invalid_params(format!(
                "`taskId` `{}` is not the task `{task_id}` this config is for",
                config.task_id
            )));
        }
        config.task_id = task_id.clone();
        self.check(&config).await?;
        if config.id.is_empty() {
            config.id = uuid::Uuid::new_v4().to_string();
        }
        let existing = self.configs(&task_id).await?;
        if existing.len() >= CONFIGS_PER_TASK && !existing.iter().any(|s| s.config.id == config.id)
        {
            return Err(PushError::invalid_params(format!(
                "task `{task_id}` has {CONFIGS_PER_TASK} push notification configs, the most it may have: delete one first"
            )));
        }
        let stored = Stored {
            config: config.clone(),
            owner: owner.clone(),
            legacy: config.legacy,
        };
        let value = serde_json::to_value(&stored)
            .map_err(|e| PushError::Internal(format!("cannot encode the config: {e}")))?;
        self.store()
            .await?
            .set(&format!("{task_id}/{}", config.id), &value, Some(KEEP))
            .await?;
        self.follow(runtime, owner, task.id().clone(), true, shutdown)
            .await?;
        Ok(config)
    }

    /// Config `id` of `task`.
    pub(crate) async fn get(&self, task: &TaskId, id: &str) -> PushResult<PushConfig> {
        let key = format!("{task}/{id}");
        let entry = self.store().await?.get(&key).await?;
        entry
            .and_then(|e| serde_json::from_value::<Stored>(e.value).ok())
            .map(|s| s.config)
            .ok_or_else(|| {
                PushError::NotFound(format!(
                    "no push notification config `{id}` on task `{task}`"
                ))
            })
    }

    /// The configs of `task`, a page at a time (by id).
    pub(crate) async fn list(&self, task: &TaskId, req: &ListConfigsRequest) -> PushResult<Value> {
        let size = match req.page_size {
            None | Some(0) => CONFIGS_PER_TASK,
            Some(n) if n > 0 => usize::try_from(n).unwrap_or(CONFIGS_PER_TASK),
            Some(n) => {
                return Err(PushError::invalid_params(format!(
                    "`pageSize` must be positive (got {n})"
                )));
            }
        };
        let mut configs: Vec<PushConfig> = self
            .configs(&task.to_string())
            .await?
            .into_iter()
            .map(|s| s.config)
            .collect();
        configs.sort_by(|a, b| a.id.cmp(&b.id));
        let after = req.page_token.as_deref().unwrap_or_default();
        let rest: Vec<PushConfig> = configs
            .into_iter()
            .filter(|c| after.is_empty() || c.id.as_str() > after)
            .collect();
        let next = if rest.len() > size {
            rest[size - 1].id.clone()
        } else {
            String::new()
        };
        let page: Vec<PushConfig> = rest.into_iter().take(size).collect();
        Ok(serde_json::json!({"configs": page, "nextPageToken": next}))
    }

    /// Deletes config `id` of `task`.
    pub(crate) async fn delete(&self, task: &TaskId, id: &str) -> PushResult<()> {
        let key = format!("{task}/{id}");
        if !self.store().await?.delete(&key).await? {
            return Err(PushError::NotFound(format!(
                "no push notification config `{id}` on task `{task}`"
            )));
        }
        Ok(())
    }

    /// Follows the unfinished tasks of the stored configs again: after a
    /// restart on one host; on a shared database, from now on, every task
    /// whose follower died.
    pub(crate) fn resume(self: &Arc<Self>, runtime: AgentRuntime, shutdown: CancellationToken) {
        if self.claims.is_some() {
            let pushes = self.clone();
            tokio::spawn(async move { pushes.sweep(&runtime, &shutdown).await });
            return;
        }
        let Opener::Local(dir) = &self.opener else {
            return;
        };
        if !dir.join("agentkit.sqlite").exists() {
            return;
        }
        let pushes = self.clone();
        tokio::spawn(async move {
            let entries = match pushes.store().await {
                Ok(store) => store.list("", WATCHED_MAX * CONFIGS_PER_TASK).await,
                Err(_) => return,
            };
            let Ok(entries) = entries else { return };
            let mut seen = HashSet::new();
            for entry in entries {
                let Ok(stored) = serde_json::from_value::<Stored>(entry.value) else {
                    continue;
                };
                let Some(id) = TaskId::parse(&stored.config.task_id) else {
                    continue;
                };
                if seen.insert(stored.config.task_id.clone())
                    && let Err(e) = pushes
                        .follow(&runtime, &stored.owner, id, false, &shutdown)
                        .await
                {
                    tracing::warn!(task = %stored.config.task_id, error = ?e, "cannot follow a task for its push notifications");
                }
            }
        });
    }

    /// On a shared database, until shutdown: renews the claims on the
    /// tasks this host follows and claims the tasks whose follower died.
    async fn sweep(self: &Arc<Self>, runtime: &AgentRuntime, shutdown: &CancellationToken) {
        let Some(claims) = &self.claims else { return };
        loop {
            tokio::select! {
                () = tokio::time::sleep(CLAIM_SWEEP) => {}
                () = shutdown.cancelled() => return,
            }
            let watched: Vec<String> = self
                .watching
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .cloned()
                .collect();
            if let Err(e) = agentkit_pg::renew_push_follows(
                &claims.db,
                &claims.agent,
                &claims.holder,
                &watched,
                CLAIM_TTL,
            )
            .await
            {
                tracing::warn!(error = %e, "cannot renew the A2A tasks this host pushes");
                continue;
            }
            let orphans = match agentkit_pg::orphaned_push_follows(
                &claims.db,
                &claims.agent,
                CLAIMS_PER_SWEEP,
            )
            .await
            {
                Ok(o) => o,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot look for A2A tasks no host pushes");
                    continue;
                }
            };
            for task in orphans {
                if let Err(e) = self.adopt(runtime, &task, shutdown).await {
                    tracing::warn!(task = %task, error = ?e, "cannot follow a task whose follower died for its push notifications");
                }
            }
        }
    }

    /// Follows `task`, whose follower died, for the webhooks it still has
    /// (a task without any needs no follower).
    async fn adopt(
        self: &Arc<Self>,
        runtime: &AgentRuntime,
        task: &str,
        shutdown: &CancellationToken,
    ) -> PushResult<()> {
        let Some(claims) = &self.claims else {
            return Ok(());
        };
        if self.is_watching(task) {
            return Ok(());
        }
        let configs = self.configs(task).await?;
        let (Some(id), Some(stored)) = (TaskId::parse(task), configs.first()) else {
            // No webhook left (deleted, or kept past its week): the row goes.
            if agentkit_pg::claim_push_follow(
                &claims.db,
                &claims.agent,
                task,
                &claims.holder,
                CLAIM_TTL,
            )
            .await
            .map_err(|e| PushError::Internal(e.to_string()))?
            .is_some()
            {
                self.end_claim(task).await;
            }
            return Ok(());
        };
        tracing::info!(task = %task, "following a task whose follower died for its push notifications");
        self.follow(runtime, &stored.owner.clone(), id, false, shutdown)
            .await
    }

    fn is_watching(&self, task: &str) -> bool {
        self.watching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(task)
    }

    /// Lets go of this host's claim on `task` (it needs no follower).
    async fn end_claim(&self, task: &str) {
        let Some(claims) = &self.claims else { return };
        if let Err(e) =
            agentkit_pg::end_push_follow(&claims.db, &claims.agent, task, &claims.holder).await
        {
            tracing::warn!(task = %task, error = %e, "cannot end following an A2A task");
        }
    }

    /// Records that `task`'s changes were pushed up to `through`: false
    /// when another host follows it now.
    async fn record(&self, task: &TaskId, through: u64) -> bool {
        let Some(claims) = &self.claims else {
            return true;
        };
        match agentkit_pg::pushed_through(
            &claims.db,
            &claims.agent,
            &task.to_string(),
            &claims.holder,
            through,
        )
        .await
        {
            Ok(ours) => ours,
            Err(e) => {
                // Kept following: the claim is renewed apart, and a
                // recording that failed only risks a change pushed twice.
                tracing::warn!(task = %task, error = %e, "cannot record how far an A2A task was pushed");
                true
            }
        }
    }

    /// Follows `task` (unless already followed here or, on a shared
    /// database, by another live host), pushing its changes to its
    /// webhooks until it ends. `first`: push the task as it is now even
    /// when it has ended (a new registration).
    async fn follow(
        self: &Arc<Self>,
        runtime: &AgentRuntime,
        owner: &Owner,
        task: TaskId,
        first: bool,
        shutdown: &CancellationToken,
    ) -> PushResult<()> {
        let key = task.to_string();
        {
            let mut watching = self
                .watching
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if watching.contains(&key) {
                return Ok(());
            }
            if watching.len() >= WATCHED_MAX {
                return Err(PushError::Unsupported(format!(
                    "this host follows {WATCHED_MAX} tasks for push notifications, the most it may: poll GetTask or stream instead"
                )));
            }
            watching.insert(key.clone());
        }
        // On a shared database: how far a follower that died pushed, or
        // nothing to do while another live host follows the task.
        let pushed = match &self.claims {
            None => None,
            Some(claims) => {
                let claimed = agentkit_pg::claim_push_follow(
                    &claims.db,
                    &claims.agent,
                    &key,
                    &claims.holder,
                    CLAIM_TTL,
                )
                .await;
                match claimed {
                    Ok(Some(pushed)) => Some(pushed),
                    Ok(None) | Err(_) => {
                        self.watching
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .remove(&key);
                        return claimed.map(|_| ()).map_err(|e| {
                            PushError::Internal(format!("cannot claim the task to push: {e}"))
                        });
                    }
                }
            }
        };
        let pushes = self.clone();
        let (runtime, owner, shutdown) = (runtime.clone(), owner.clone(), shutdown.clone());
        tokio::spawn(async move {
            if let Err(e) = pushes
                .run(&runtime, &owner, &task, first, pushed, &shutdown)
                .await
            {
                tracing::warn!(task = %key, error = ?e, "stopped following a task for its push notifications");
            }
            pushes
                .watching
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&key);
        });
        Ok(())
    }

    /// Pushes `task`'s changes until it ends. `pushed`, on a shared
    /// database: the log index its changes were pushed up to (0: none),
    /// from which this host pushes on.
    async fn run(
        &self,
        runtime: &AgentRuntime,
        owner: &Owner,
        task: &TaskId,
        first: bool,
        pushed: Option<u64>,
        shutdown: &CancellationToken,
    ) -> PushResult<()> {
        let events = runtime
            .events_stored(&task.session, owner, task.start)
            .await?;
        let mut fold = TaskFold::new(task.clone());
        let mut next = task.start;
        // The state changed after what was pushed.
        let mut changed = false;
        for e in &events {
            let change = fold.observe(e);
            changed |= change == Some(Change::Status) && pushed.is_some_and(|p| e.index >= p);
            next = e.index + 1;
        }
        // A follower that died had pushed up to `p`: only what changed
        // since is pushed.
        let resumed = pushed.is_some_and(|p| p > 0) && !first;
        if resumed {
            if changed {
                let events = fold.stream_events(&Change::Status);
                self.push(task, &events, &fold.task(None)).await;
            }
        } else if first || pushed.is_some() || !fold.state().is_terminal() {
            let now = fold.task(None);
            self.push(task, &[StreamResponse::Task(now.clone())], &now)
                .await;
        }
        if !self.record(task, next).await {
            return Ok(());
        }
        if fold.state().is_terminal() {
            self.end_claim(&task.to_string()).await;
            return Ok(());
        }
        let mut sub = runtime.subscribe(&task.session, owner, next).await?;
        loop {
            let event = tokio::select! {
                e = tokio::time::timeout(IDLE_CHECK, sub.next()) => e,
                () = shutdown.cancelled() => return Ok(()),
            };
            let change = match event {
                Ok(Ok(event)) => {
                    next = event.index + 1;
                    fold.observe(&event)
                }
                Ok(Err(e)) => {
                    return Err(PushError::Internal(format!(
                        "cannot read the session's events: {e}"
                    )));
                }
                Err(_) if super::task::dropped(runtime, &fold) => {
                    fold.dropped();
                    Some(Change::Status)
                }
                Err(_) => None,
            };
            if change == Some(Change::Status) {
                let events = fold.stream_events(&Change::Status);
                self.push(task, &events, &fold.task(None)).await;
                if !self.record(task, next).await {
                    // Another host follows the task now.
                    return Ok(());
                }
            }
            if fold.state().is_terminal() {
                self.end_claim(&task.to_string()).await;
                return Ok(());
            }
        }
    }

    /// POSTs a change of `task` to every webhook of it, each with its own
    /// tries: `events` one by one (in order) to a 1.0 webhook, the task
    /// `now` once to a webhook registered through A2A 0.3.
    async fn push(&self, task: &TaskId, events: &[StreamResponse], now: &super::wire::Task) {
        let configs = match self.configs(&task.to_string()).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(task = %task, error = ?e, "cannot read a task's push notification configs");
                return;
            }
        };
        let bodies: Vec<Vec<u8>> = events
            .iter()
            .filter_map(|e| serde_json::to_vec(e).ok())
            .collect();
        let body_03 = serde_json::to_value(now)
            .ok()
            .map(super::wire_03::task_03)
            .and_then(|v| serde_json::to_vec(&v).ok())
            .unwrap_or_default();
        let sends = configs.iter().map(|stored| async {
            if stored.legacy {
                self.post(task, &stored.config, &body_03).await;
            } else {
                for body in &bodies {
                    self.post(task, &stored.config, body).await;
                }
            }
        });
        futures_util::future::join_all(sends).await;
    }

    /// The push client, built on first use.
    fn client(&self) -> Result<&reqwest::Client, &str> {
        let private_ok = self.private_ok;
        self.client
            .get_or_init(|| {
                reqwest::Client::builder()
                    .dns_resolver(Arc::new(Resolver { private_ok }))
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(POST_TIMEOUT)
                    .connect_timeout(POST_TIMEOUT)
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(String::as_str)
    }

    async fn post(&self, task: &TaskId, config: &PushConfig, body: &[u8]) {
        let client = match self.client() {
            Ok(client) => client,
            Err(e) => {
                tracing::warn!(task = %task, config = %config.id, error = e, "cannot build the A2A push client: the notification is dropped");
                return;
            }
        };
        for attempt in 0..=RETRY_WAITS.len() {
            if let Some(wait) = attempt.checked_sub(1).and_then(|i| RETRY_WAITS.get(i)) {
                tokio::time::sleep(*wait).await;
            }
            let mut req = client
                .post(&config.url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_vec());
            if !config.token.is_empty() {
                req = req.header("X-A2A-Notification-Token", &config.token);
            }
            if let Some(auth) = &config.authentication
                && !auth.credentials.is_empty()
            {
                req = req.header(
                    reqwest::header::AUTHORIZATION,
                    format!("{} {}", auth.scheme, auth.credentials),
                );
            }
            match req.send().await {
                Ok(resp) if resp.status().is_success() => return,
                // Names neither the URL nor the credentials.
                Ok(resp) => {
                    tracing::warn!(task = %task, config = %config.id, status = resp.status().as_u16(), attempt, "an A2A push notification was refused")
                }
                Err(e) => {
                    let why = if e.is_timeout() {
                        "timed out"
                    } else if e.is_connect() {
                        "could not connect (or the address is not public)"
                    } else {
                        "failed"
                    };
                    tracing::warn!(task = %task, config = %config.id, attempt, "an A2A push notification {why}");
                }
            }
        }
    }
}

/// Whether `ip` is not a public unicast address.
pub(crate) fn not_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (18..20).contains(&b))
                || a >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return not_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || first == 0x2001 && v6.segments()[1] == 0x0db8
                || first == 0x0064 && v6.segments()[1] == 0xff9b
                || v6.segments()[..6] == [0; 6]
        }
    }
}

/// Checks a webhook URL: `http` or `https`, a host, no user info, and
/// (unless private networks are allowed) an address or name that reaches
/// a public address.
async fn check_url(url: &str, private_ok: bool) -> PushResult<()> {
    if url.len() > MAX_URL {
        return Err(PushError::invalid_params(format!(
            "the push notification `url` is longer than {MAX_URL} bytes"
        )));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        PushError::invalid_params(format!("the push notification `url` is not a URL: {e}"))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(PushError::invalid_params(
            "the push notification `url` must be http or https",
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(PushError::invalid_params(
            "the push notification `url` must not carry credentials: put them in `authentication`",
        ));
    }
    let Some(host) = parsed.host_str().filter(|h| !h.is_empty()) else {
        return Err(PushError::invalid_params(
            "the push notification `url` has no host",
        ));
    };
    if private_ok {
        return Ok(());
    }
    let refused = || {
        PushError::invalid_params(
            "the push notification `url` does not reach a public address: this server calls only public addresses unless started with --a2a-push-private-networks",
        )
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return if not_public(ip) {
            Err(refused())
        } else {
            Ok(())
        };
    }
    let port = parsed.port_or_known_default().unwrap_or(80);
    let found = tokio::time::timeout(
        POST_TIMEOUT,
        tokio::net::lookup_host((bare.to_owned(), port)),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .map(|addrs| addrs.filter(|a| !not_public(a.ip())).count())
    .unwrap_or(0);
    if found == 0 { Err(refused()) } else { Ok(()) }
}

/// Resolves names to their public addresses only (unless private
/// networks are allowed), so a name cannot be made to point inside after
/// it was checked.
struct Resolver {
    private_ok: bool,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let private_ok = self.private_ok;
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0))
                .await?
                .filter(|a| private_ok || !not_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("`{name}` resolves to no public address").into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
        ] {
            assert!(not_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"] {
            assert!(!not_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn webhook_urls_are_checked() {
        assert!(check_url("ftp://example.com/x", true).await.is_err());
        assert!(check_url("not a url", true).await.is_err());
        assert!(
            check_url("http://user:pw@example.com/", true)
                .await
                .is_err()
        );
        assert!(check_url("http://127.0.0.1:9/hook", false).await.is_err());
        assert!(check_url("http://[::1]:9/hook", false).await.is_err());
        assert!(check_url("http://localhost:9/hook", false).await.is_err());
        assert!(check_url("http://127.0.0.1:9/hook", true).await.is_ok());
        assert!(check_url("http://1.1.1.1/hook", false).await.is_ok());
    }
}
