//! Artifacts: records an agent keeps beyond its conversation (a finding
//! it posted, a journal entry), tagged by the model's `tag_artifact`
//! built-in or by host code, each in a session, listed by kind and
//! session. Reached as `runtime.retention().artifacts()`: its rows live behind
//! `agentkit_store::SharedArtifacts` (this host's `agentkit.sqlite`,
//! `artifacts_local.rs`, or the shared store); every tag also records an
//! `artifact.tagged` event in the session's log.
//!
//! With `artifacts.toml`, only its kinds are accepted and each one's data
//! must match its schema; without it, any kind is (`artifact` when none
//! is given). Tagging a kind and key again updates that artifact; with
//! `max`, the least recently updated beyond it are deleted.

use std::sync::Arc;

use agentkit_harness::{DynTool, ToolContext, ToolFuture, ToolOutput, ToolSpec};
use agentkit_protocol::api::Artifact;
use agentkit_protocol::{ArtifactTagged, EventData, EventType};
use agentkit_store::{ArtifactQuery, ArtifactRow, SharedArtifacts};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::runtime::{AgentRuntime, WeakRuntime};
use crate::session::Session;
use crate::tool_call::Release;
use crate::util::new_id;

/// The kind of an artifact tagged without one, where kinds are free.
pub const DEFAULT_KIND: &str = "artifact";

/// The longest key, in bytes.
pub const MAX_ARTIFACT_KEY_BYTES: usize = 512;

/// The largest data, as JSON text.
pub const MAX_ARTIFACT_BYTES: usize = 64 * 1024;

/// The built-in tool's name.
pub const TAG_TOOL: &str = "tag_artifact";

/// What host code (or the model) tags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TagRequest {
    /// `None`: [`DEFAULT_KIND`].
    pub kind: Option<String>,
    pub key: Option<String>,
    pub data: Value,
}

/// Which artifacts a listing holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArtifactFilter {
    pub kind: Option<String>,
    pub session: Option<String>,
    pub limit: usize,
    /// The id of the previous page's last artifact.
    pub after: Option<String>,
}

/// One page, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactPage {
    pub artifacts: Vec<Artifact>,
    /// The id to continue after, when more remain.
    pub next: Option<String>,
}

/// A session held for a record made outside the model's steps (an
/// artifact tagged, a memory kept). Inside a running turn the record
/// joins that turn; outside one the session is claimed idle for it (as an
/// emitted message is) until [`finish`](Held::finish), which makes the
/// record durable.
pub(crate) struct Held<'a> {
    pub(crate) session: Arc<Session>,
    /// The running turn, else the session's last one.
    pub(crate) turn: Option<String>,
    running: bool,
    rt: &'a AgentRuntime,
    guard: Option<Release<'a>>,
}

impl<'a> Held<'a> {
    pub(crate) async fn of(rt: &'a AgentRuntime, session_id: &str) -> Result<Held<'a>> {
        let session = rt.sessions().get(session_id).await?;
        rt.turns().ready(&session).await?;
        let running = session.state().is_running();
        let guard = if running {
            None
        } else {
            Some(Release {
                runtime: rt,
                session: rt.turns().claim_idle(&session).await?,
            })
        };
        let turn = rt
            .turns()
            .with_history(&session, |events| last_turn(events, running))
            .await?;
        Ok(Held {
            session,
            turn,
            running,
            rt,
            guard,
        })
    }

    /// Appends the record's event: the running turn's, else no turn's.
    pub(crate) async fn append(
        &self,
        data: EventData,
    ) -> Result<std::sync::Arc<agentkit_protocol::Event>> {
        let turn = if self.running {
            self.turn.as_deref()
        } else {
            None
        };
        self.rt.turns().append(&self.session.id, turn, data).await
    }

    /// Makes the record durable when the session was claimed for it, and
    /// lets the session go.
    pub(crate) async fn finish(self) -> Result<()> {
        if self.guard.is_some() {
            self.rt.store().sync(&self.session.id).await?;
        }
        Ok(())
    }
}

/// The artifacts of one agent.
#[derive(Debug, Clone, Copy)]
pub struct Artifacts<'a> {
    rt: &'a AgentRuntime,
}

impl<'a> crate::deletion::Retention<'a> {
    /// The agent's artifacts.
    pub fn artifacts(&self) -> Artifacts<'a> {
        Artifacts::of(self.runtime())
    }
}

fn time_of(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn artifact_of(row: ArtifactRow) -> Artifact {
    Artifact {
        data: serde_json::from_str(&row.data).unwrap_or(Value::String(row.data)),
        id: row.id,
        kind: row.kind,
        key: row.key,
        session_id: row.session_id,
        turn_id: row.turn_id,
        created_at: time_of(row.created_at_ms),
        updated_at: time_of(row.updated_at_ms),
    }
}

impl<'a> Artifacts<'a> {
    pub(crate) fn of(rt: &'a AgentRuntime) -> Artifacts<'a> {
        Artifacts { rt }
    }

    fn table(&self) -> Result<Arc<dyn SharedArtifacts>> {
        Ok(self.rt.inner.artifacts.clone())
    }

    /// The kind `kind` names, checked against `artifacts.toml`, and
    /// `data` against its schema.
    fn check(&self, kind: Option<&str>, key: Option<&str>, data: &Value) -> Result<String> {
        let bad = |message: String| Error::BadRequest { message };
        let kind = kind.unwrap_or(DEFAULT_KIND);
        if let Some(key) = key
            && (key.is_empty() || key.len() > MAX_ARTIFACT_KEY_BYTES)
        {
            return Err(bad(format!(
                "an artifact's `key` is 1 to {MAX_ARTIFACT_KEY_BYTES} bytes"
            )));
        }
        let size = data.to_string().len();
        if size > MAX_ARTIFACT_BYTES {
            return Err(bad(format!(
                "the artifact's data is {size} bytes of JSON; at most {MAX_ARTIFACT_BYTES}"
            )));
        }
        match &self.rt.agent().artifacts {
            None => {
                if !agentkit_manifest::is_valid_slug(kind) {
                    return Err(bad(format!(
                        "artifact kind `{kind}` is not a valid name (letters, digits, `_` and `-`, at most 64)"
                    )));
                }
            }
            Some(declared) => {
                let Some(spec) = declared.kind(kind) else {
                    let names: Vec<&str> = declared.kinds.iter().map(|k| k.name.as_str()).collect();
                    return Err(bad(format!(
                        "artifact kind `{kind}` is not declared in `{}`; declared: {}",
                        declared.path,
                        names.join(", ")
                    )));
                };
                if let Some(schema) = &spec.schema {
                    let errors = agentkit_manifest::schema_errors(schema, data).map_err(|e| {
                        bad(format!("kind `{kind}`'s schema does not compile: {e}"))
                    })?;
                    if !errors.is_empty() {
                        let list: Vec<String> = errors
                            .iter()
                            .map(|(at, message)| {
                                format!("{}: {message}", if at.is_empty() { "/" } else { at })
                            })
                            .collect();
                        return Err(bad(format!(
                            "the data does not match kind `{kind}`'s schema: {}",
                            list.join("; ")
                        )));
                    }
                }
            }
        }
        Ok(kind.to_owned())
    }

    /// Tags an artifact in session `session_id` for host code (a route
    /// handler, a tool through the host bridge, a Rust embedder): whoever
    /// owns the session. Refused (`400`) when the kind is not declared or
    /// the data does not match its schema.
    pub async fn tag(&self, session_id: &str, req: TagRequest) -> Result<Artifact> {
        self.tag_as(session_id, req, None).await
    }

    async fn tag_as(
        &self,
        session_id: &str,
        req: TagRequest,
        call_id: Option<&str>,
    ) -> Result<Artifact> {
        let kind = self.check(req.kind.as_deref(), req.key.as_deref(), &req.data)?;
        let held = Held::of(self.rt, session_id).await?;
        let (session, turn) = (held.session.clone(), held.turn.clone());
        let now = chrono::Utc::now().timestamp_millis();
        let row = ArtifactRow {
            id: new_id("art"),
            kind: kind.clone(),
            key: req.key.clone(),
            data: req.data.to_string(),
            session_id: session.id.as_str().to_owned(),
            principal_id: session.meta().owner.principal_id.clone(),
            turn_id: turn.clone(),
            created_at_ms: now,
            updated_at_ms: now,
        };
        let max = self
            .rt
            .agent()
            .artifacts
            .as_ref()
            .and_then(|a| a.max)
            .map(|m| i64::try_from(m).unwrap_or(i64::MAX));
        let tagged = self.table()?.tag(&row, max).await?;
        if tagged.evicted > 0 {
            tracing::info!(
                evicted = tagged.evicted,
                max,
                "artifacts beyond `max` deleted (least recently updated first)"
            );
        }
        let data = EventData::ArtifactTagged(ArtifactTagged {
            artifact_id: tagged.row.id.clone(),
            kind,
            key: req.key,
            data: req.data,
            updated: tagged.updated,
            call_id: call_id.map(str::to_owned),
        });
        held.append(data).await?;
        held.finish().await?;
        Ok(artifact_of(tagged.row))
    }

    /// The artifacts `owner` may see (its sessions'; every one for an
    /// operator), newest first.
    pub async fn list(&self, owner: &Owner, filter: ArtifactFilter) -> Result<ArtifactPage> {
        if let Some(session) = &filter.session {
            // Someone else's session answers as it would on its own route.
            self.rt.sessions().owned(session, owner).await?;
        }
        let principal = (!owner.is_operator()).then(|| owner.principal_id.clone());
        if owner.admin {
            return self.page(principal.as_deref(), filter).await;
        }
        self.page_of_tenant(principal.as_deref(), owner, filter)
            .await
    }

    /// A page of the artifacts of sessions in `owner`'s tenant: the rows
    /// have no tenant, so each is checked against its session's, and
    /// pages are read until this one is full or the rows run out.
    async fn page_of_tenant(
        &self,
        principal: Option<&str>,
        owner: &Owner,
        mut filter: ArtifactFilter,
    ) -> Result<ArtifactPage> {
        let limit = filter.limit.max(1);
        let mut sight = crate::sessions::TenantSight::new(owner);
        let mut out = Vec::new();
        loop {
            let page = self.page(principal, filter.clone()).await?;
            for a in page.artifacts {
                if sight.sees(self.rt, &a.session_id).await {
                    out.push(a);
                }
                if out.len() == limit {
                    let next = out.last().map(|a| a.id.clone());
                    return Ok(ArtifactPage {
                        artifacts: out,
                        next,
                    });
                }
            }
            match page.next {
                Some(next) => filter.after = Some(next),
                None => {
                    return Ok(ArtifactPage {
                        artifacts: out,
                        next: None,
                    });
                }
            }
        }
    }

    /// Every artifact, whoever's session tagged it (host code: route
    /// handlers and tools through the host bridge, Rust embedders).
    pub async fn list_all(&self, filter: ArtifactFilter) -> Result<ArtifactPage> {
        self.page(None, filter).await
    }

    /// The artifacts of session `id`, for `owner` (its owner or an
    /// operator).
    pub async fn of_session(
        &self,
        id: &str,
        owner: &Owner,
        mut filter: ArtifactFilter,
    ) -> Result<ArtifactPage> {
        let session = self.rt.sessions().owned(id, owner).await?;
        filter.session = Some(session.id.as_str().to_owned());
        self.page(None, filter).await
    }

    async fn page(&self, principal: Option<&str>, filter: ArtifactFilter) -> Result<ArtifactPage> {
        let limit = filter.limit.max(1);
        let mut rows = self
            .table()?
            .page(ArtifactQuery {
                principal,
                session: filter.session.as_deref(),
                kind: filter.kind.as_deref(),
                before: filter.after.as_deref(),
                limit: i64::try_from(limit + 1).unwrap_or(i64::MAX),
            })
            .await?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = more.then(|| rows.last().map(|r| r.id.clone())).flatten();
        Ok(ArtifactPage {
            artifacts: rows.into_iter().map(artifact_of).collect(),
            next,
        })
    }

    /// One artifact by id, if `owner` may see it.
    pub async fn get(&self, id: &str, owner: &Owner) -> Result<Artifact> {
        let not_found = || Error::NotFound {
            what: "artifact",
            id: id.to_owned(),
        };
        let row = self.table()?.get(id).await?.ok_or_else(not_found)?;
        if !owner.is_operator() && row.principal_id != owner.principal_id {
            return Err(not_found());
        }
        if !self.rt.sessions().sees_tenant(&row.session_id, owner).await {
            return Err(not_found());
        }
        Ok(artifact_of(row))
    }

    /// Deletes every artifact of session `id` (the session is being
    /// deleted); how many.
    pub async fn delete_session(&self, id: &str) -> Result<u64> {
        Ok(self.table()?.delete_session(id).await?)
    }

    /// The `tag_artifact` tool, when `artifacts.toml` offers it.
    pub(crate) fn tool(&self) -> Option<Arc<dyn DynTool>> {
        let declared = self.rt.agent().artifacts.as_ref()?;
        if !declared.agent_tool || declared.kinds.is_empty() {
            return None;
        }
        let names: Vec<&str> = declared.kinds.iter().map(|k| k.name.as_str()).collect();
        let catalog: Vec<String> = declared
            .kinds
            .iter()
            .map(|k| match &k.schema {
                Some(schema) => format!("`{}`: {} (data schema: {schema})", k.name, k.description),
                None => format!("`{}`: {}", k.name, k.description),
            })
            .collect();
        let spec = ToolSpec {
            name: TAG_TOOL.to_owned(),
            description: format!(
                "Keep a record beyond this conversation: tag an artifact of a kind, with data matching the kind's schema. Tagging the same kind and `key` again updates that artifact. Kinds: {}",
                catalog.join("; ")
            ),
            input_schema: json!({
                "type": "object",
                "required": ["kind", "data"],
                "additionalProperties": false,
                "properties": {
                    "kind": {"type": "string", "enum": names},
                    "key": {"type": "string", "minLength": 1, "maxLength": MAX_ARTIFACT_KEY_BYTES, "description": "names the artifact: tagging the same kind and key again updates it"},
                    "data": {"description": "the record, matching the kind's schema"}
                }
            }),
            read_only: false,
            needs_approval: agentkit_manifest::Approval::Never,
        };
        Some(Arc::new(TagTool {
            spec,
            runtime: self.rt.downgrade(),
        }))
    }
}

/// The turn an artifact belongs to: the open turn while one runs, else
/// the session's last.
pub(crate) fn last_turn(events: &[agentkit_protocol::Event], running: bool) -> Option<String> {
    events
        .iter()
        .rev()
        .find(|e| {
            e.event_type == EventType::TurnStarted
                || (!running
                    && matches!(
                        e.event_type,
                        EventType::TurnCompleted | EventType::TurnFailed
                    ))
        })
        .and_then(|e| e.turn_id.clone())
}

/// The built-in `tag_artifact`: the model tags in its own session.
#[derive(Debug)]
struct TagTool {
    spec: ToolSpec,
    runtime: WeakRuntime,
}

impl DynTool for TagTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture {
        let runtime = self.runtime.clone();
        Box::pin(async move {
            let Some(runtime) = runtime.upgrade() else {
                return ToolOutput::error("the agent's runtime has stopped");
            };
            if ctx.session_id.is_empty() {
                return ToolOutput::error("`tag_artifact` tags in a session; this call has none");
            }
            let req = TagRequest {
                kind: input.get("kind").and_then(Value::as_str).map(str::to_owned),
                key: input.get("key").and_then(Value::as_str).map(str::to_owned),
                data: input.get("data").cloned().unwrap_or(Value::Null),
            };
            match Artifacts::of(&runtime)
                .tag_as(&ctx.session_id, req, Some(&ctx.call_id))
                .await
            {
                Ok(artifact) => ToolOutput {
                    output: json!({"artifactId": artifact.id, "kind": artifact.kind, "key": artifact.key}),
                    is_error: false,
                },
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}
