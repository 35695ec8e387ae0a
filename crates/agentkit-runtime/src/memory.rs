//! Governed memory: short texts the model keeps beyond a conversation
//! with the opt-in built-ins `remember`, `recall` and `forget`
//! (`[harness] builtin_tools`), each with its provenance (session, turn,
//! the index of its `memory.remembered` event, principal) and a scope:
//! `principal` (only that principal's sessions see it) or `agent` (every
//! session does). Reached as `runtime.retention().memory()`: rows live behind
//! `agentkit_store::SharedMemories` (this host's `agentkit.sqlite`,
//! `memory_local.rs`, or the shared store), listed, read, edited and
//! deleted over `/v1/memory` by their principal or an operator.
//!
//! `recall` reads the newest [`RECALL_WINDOW`] memories the session's
//! principal sees and keeps those containing any word of the query
//! (case-insensitive), ranked by how many words match, then most
//! recently updated first.

use std::sync::Arc;

use agentkit_harness::{DynTool, ToolContext, ToolFuture, ToolOutput, ToolSpec};
use agentkit_protocol::api::{Memory, MemoryProvenance};
use agentkit_protocol::{EventData, MemoryForgotten, MemoryRemembered};
use agentkit_store::{AGENT_SCOPE, MemoryQuery, MemoryRow, SharedMemories};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::runtime::{AgentRuntime, WeakRuntime};
use crate::util::new_id;

/// The longest memory text, in bytes.
pub const MAX_MEMORY_BYTES: usize = 4096;

/// How many of the newest visible memories `recall` searches.
pub const RECALL_WINDOW: usize = 1000;

/// How many memories `recall` answers at most (and by default).
pub const RECALL_MAX: usize = 20;
const RECALL_DEFAULT: usize = 5;

/// The built-ins' names.
pub const MEMORY_TOOLS: [&str; 3] = ["remember", "recall", "forget"];

/// The scope of a memory only its principal's sessions see.
pub const PRINCIPAL_SCOPE: &str = "principal";

/// One page of memories, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPage {
    pub memories: Vec<Memory>,
    /// The id to continue after, when more remain.
    pub next: Option<String>,
}

/// The governed memories of one agent.
#[derive(Debug, Clone, Copy)]
pub struct Memories<'a> {
    rt: &'a AgentRuntime,
}

impl<'a> crate::deletion::Retention<'a> {
    /// The agent's governed memories (`remember` / `recall` / `forget`).
    pub fn memory(&self) -> Memories<'a> {
        Memories { rt: self.runtime() }
    }
}

fn time_of(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn memory_of(row: MemoryRow) -> Memory {
    Memory {
        id: row.id,
        text: row.text,
        scope: row.scope,
        provenance: MemoryProvenance {
            session_id: row.session_id,
            turn_id: row.turn_id,
            event_index: row.event_index.and_then(|i| u64::try_from(i).ok()),
            principal: row.principal_id,
        },
        created_at: time_of(row.created_at_ms),
        updated_at: time_of(row.updated_at_ms),
    }
}

fn check_text(text: &str) -> Result<()> {
    if text.trim().is_empty() || text.len() > MAX_MEMORY_BYTES {
        return Err(Error::BadRequest {
            message: format!(
                "a memory's text is 1 to {MAX_MEMORY_BYTES} bytes, not blank (this one is {})",
                text.len()
            ),
        });
    }
    Ok(())
}

fn visible(row: &MemoryRow, owner: &Owner) -> bool {
    owner.is_operator() || row.scope == AGENT_SCOPE || row.principal_id == owner.principal_id
}

/// How many of `words` `text` contains (both lowercased).
fn matches(text: &str, words: &[String]) -> usize {
    let text = text.to_lowercase();
    words.iter().filter(|w| text.contains(w.as_str())).count()
}

impl<'a> Memories<'a> {
    fn table(&self) -> Result<Arc<dyn SharedMemories>> {
        Ok(self.rt.inner.memories.clone())
    }

    /// Keeps `text` as a memory of session `session_id` (its principal's,
    /// or the agent's with `scope = "agent"`), recording
    /// `memory.remembered` in its log.
    pub(crate) async fn remember(
        &self,
        session_id: &str,
        text: &str,
        scope: &str,
        call_id: Option<&str>,
    ) -> Result<Memory> {
        check_text(text)?;
        if scope != PRINCIPAL_SCOPE && scope != AGENT_SCOPE {
            return Err(Error::BadRequest {
                message: format!("a memory's scope is `principal` or `agent`, not `{scope}`"),
            });
        }
        let held = crate::artifacts::Held::of(self.rt, session_id).await?;
        let (session, turn) = (held.session.clone(), held.turn.clone());
        let id = new_id("mem");
        let event = held
            .append(EventData::MemoryRemembered(MemoryRemembered {
                memory_id: id.clone(),
                scope: scope.to_owned(),
                text: text.to_owned(),
                call_id: call_id.map(str::to_owned),
            }))
            .await?;
        let now = chrono::Utc::now().timestamp_millis();
        let row = MemoryRow {
            id,
            text: text.to_owned(),
            scope: scope.to_owned(),
            principal_id: session.meta().owner.principal_id.clone(),
            session_id: session.id.as_str().to_owned(),
            turn_id: turn,
            event_index: i64::try_from(event.index).ok(),
            created_at_ms: now,
            updated_at_ms: now,
        };
        if let Err(e) = self.table()?.insert(&row).await {
            // The log said it was kept: it says now that it is not.
            held.append(EventData::MemoryForgotten(MemoryForgotten {
                memory_id: row.id.clone(),
                call_id: call_id.map(str::to_owned),
            }))
            .await?;
            held.finish().await?;
            return Err(e.into());
        }
        held.finish().await?;
        Ok(memory_of(row))
    }

    /// Keeps `text` as a memory of session `session_id`, as the `remember`
    /// tool does but for host code (no tool call): the session principal's
    /// (`scope` `"principal"`) or every session's (`"agent"`).
    pub async fn remember_for_host(
        &self,
        session_id: &str,
        text: &str,
        scope: &str,
    ) -> Result<Memory> {
        self.remember(session_id, text, scope, None).await
    }

    /// The memories `principal`'s sessions see that match `query`, best
    /// first (see the module's note), at most `limit`.
    pub async fn recall(&self, principal: &str, query: &str, limit: usize) -> Result<Vec<Memory>> {
        self.recall_in(principal, None, query, limit).await
    }

    /// [`recall`](Self::recall) for a session's owner: only the memories
    /// of sessions in its tenant.
    pub(crate) async fn recall_in(
        &self,
        principal: &str,
        owner: Option<&Owner>,
        query: &str,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let words: Vec<String> = query
            .split_whitespace()
            .map(str::to_lowercase)
            .filter(|w| !w.is_empty())
            .collect();
        let rows = self
            .table()?
            .page(MemoryQuery {
                principal: Some(principal),
                before: None,
                limit: i64::try_from(RECALL_WINDOW).unwrap_or(i64::MAX),
            })
            .await?;
        let rows = match owner {
            Some(owner) => self.of_tenant(rows, owner).await,
            None => rows,
        };
        let mut hits: Vec<(usize, MemoryRow)> = rows
            .into_iter()
            .map(|r| (matches(&r.text, &words), r))
            .filter(|(n, _)| *n > 0 || words.is_empty())
            .collect();
        hits.sort_by(|(na, a), (nb, b)| {
            nb.cmp(na)
                .then(b.updated_at_ms.cmp(&a.updated_at_ms))
                .then(b.id.cmp(&a.id))
        });
        Ok(hits
            .into_iter()
            .take(limit.clamp(1, RECALL_MAX))
            .map(|(_, r)| memory_of(r))
            .collect())
    }

    /// The rows of `rows` that come from sessions of `owner`'s tenant.
    async fn of_tenant(&self, rows: Vec<MemoryRow>, owner: &Owner) -> Vec<MemoryRow> {
        let mut sight = crate::sessions::TenantSight::new(owner);
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            if sight.sees(self.rt, &row.session_id).await {
                out.push(row);
            }
        }
        out
    }

    /// The memories `owner` sees (its principal-scoped ones and every
    /// agent-scoped one; all of them for an operator), from sessions of
    /// its tenant (every tenant for an admin), newest first.
    pub async fn list(
        &self,
        owner: &Owner,
        limit: usize,
        after: Option<&str>,
    ) -> Result<MemoryPage> {
        let limit = limit.max(1);
        let principal = (!owner.is_operator()).then(|| owner.principal_id.clone());
        let mut rows = Vec::new();
        let mut before = after.map(str::to_owned);
        // The rows carry no tenant: pages are read until this one is full
        // of rows from sessions of `owner`'s tenant, or the rows run out.
        loop {
            let want = limit + 1 - rows.len();
            let page = self
                .table()?
                .page(MemoryQuery {
                    principal: principal.as_deref(),
                    before: before.as_deref(),
                    limit: i64::try_from(want).unwrap_or(i64::MAX),
                })
                .await?;
            let last = page.len() < want;
            before = page.last().map(|r| r.id.clone());
            rows.extend(self.of_tenant(page, owner).await);
            if last || rows.len() > limit {
                break;
            }
        }
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = more.then(|| rows.last().map(|r| r.id.clone())).flatten();
        Ok(MemoryPage {
            memories: rows.into_iter().map(memory_of).collect(),
            next,
        })
    }

    /// The row of memory `id`, if `owner` sees it; with `change`, only
    /// if `owner` may change it (its principal, or an operator): `403`
    /// for a memory it sees but did not remember.
    async fn row_for(&self, id: &str, owner: &Owner, change: bool) -> Result<MemoryRow> {
        let not_found = || Error::NotFound {
            what: "memory",
            id: id.to_owned(),
        };
        let row = self.table()?.get(id).await?.ok_or_else(not_found)?;
        if !visible(&row, owner) || !self.rt.sessions().sees_tenant(&row.session_id, owner).await {
            return Err(not_found());
        }
        if change && !owner.is_operator() && row.principal_id != owner.principal_id {
            return Err(Error::NotOwned {
                what: "memory",
                id: id.to_owned(),
            });
        }
        Ok(row)
    }

    /// Memory `id`, if `owner` sees it.
    pub async fn get(&self, id: &str, owner: &Owner) -> Result<Memory> {
        Ok(memory_of(self.row_for(id, owner, false).await?))
    }

    /// Replaces memory `id`'s text, for its principal or an operator.
    pub async fn edit(&self, id: &str, owner: &Owner, text: &str) -> Result<Memory> {
        check_text(text)?;
        self.row_for(id, owner, true).await?;
        let now = chrono::Utc::now().timestamp_millis();
        let row = self
            .table()?
            .edit(id, text, now)
            .await?
            .ok_or_else(|| Error::NotFound {
                what: "memory",
                id: id.to_owned(),
            })?;
        Ok(memory_of(row))
    }

    /// Deletes memory `id`, for its principal or an operator.
    pub async fn delete(&self, id: &str, owner: &Owner) -> Result<()> {
        self.row_for(id, owner, true).await?;
        self.table()?.delete(id).await?;
        Ok(())
    }

    /// `forget` in session `session_id`: as its principal may delete.
    async fn forget(&self, session_id: &str, id: &str, call_id: Option<&str>) -> Result<()> {
        let session = self.rt.sessions().get(session_id).await?;
        let owner = session.meta().owner.clone();
        self.delete(id, &owner).await?;
        let running = session.state().is_running();
        if running {
            let turn = self
                .rt
                .turns()
                .with_history(&session, |events| crate::artifacts::last_turn(events, true))
                .await?;
            self.rt
                .turns()
                .append(
                    &session.id,
                    turn.as_deref(),
                    EventData::MemoryForgotten(MemoryForgotten {
                        memory_id: id.to_owned(),
                        call_id: call_id.map(str::to_owned),
                    }),
                )
                .await?;
        }
        Ok(())
    }

    /// The memory built-ins `[harness] builtin_tools` enables (an
    /// authored tool of the same name is refused by discovery).
    pub(crate) fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        let agent = self.rt.agent();
        let wanted = |name: &str| {
            agent.config.harness.builtin_tools.iter().any(|n| n == name)
                && agent.tool(name).is_none()
        };
        let mut out: Vec<Arc<dyn DynTool>> = Vec::new();
        for name in MEMORY_TOOLS {
            if !wanted(name) {
                continue;
            }
            let (description, schema) = match name {
                "remember" => (
                    "Keep a short note beyond this conversation. `scope`: `principal` (default) keeps it for the person you are talking with, in all their conversations; `agent` keeps it for everyone's conversations. Answers the memory's id.",
                    json!({"type": "object", "required": ["text"], "additionalProperties": false, "properties": {
                        "text": {"type": "string", "minLength": 1, "maxLength": MAX_MEMORY_BYTES},
                        "scope": {"type": "string", "enum": [PRINCIPAL_SCOPE, AGENT_SCOPE]}
                    }}),
                ),
                "recall" => (
                    "Search the notes kept with `remember` (yours and everyone's agent-wide ones): those containing any word of `query`, best match then newest first, with their ids.",
                    json!({"type": "object", "required": ["query"], "additionalProperties": false, "properties": {
                        "query": {"type": "string"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": RECALL_MAX}
                    }}),
                ),
                _ => (
                    "Delete a note kept with `remember`, by its id.",
                    json!({"type": "object", "required": ["id"], "additionalProperties": false, "properties": {
                        "id": {"type": "string", "minLength": 1}
                    }}),
                ),
            };
            out.push(Arc::new(MemoryTool {
                spec: ToolSpec {
                    name: name.to_owned(),
                    description: description.to_owned(),
                    input_schema: schema,
                    read_only: name == "recall",
                    needs_approval: agentkit_manifest::Approval::Never,
                },
                runtime: self.rt.downgrade(),
            }));
        }
        out
    }
}

/// `remember`, `recall` or `forget`, in the calling session.
#[derive(Debug)]
struct MemoryTool {
    spec: ToolSpec,
    runtime: WeakRuntime,
}

impl DynTool for MemoryTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture {
        let runtime = self.runtime.clone();
        let name = self.spec.name.clone();
        Box::pin(async move {
            let Some(runtime) = runtime.upgrade() else {
                return ToolOutput::error("the agent's runtime has stopped");
            };
            if ctx.session_id.is_empty() {
                return ToolOutput::error(format!(
                    "`{name}` works in a session; this call has none"
                ));
            }
            let memory = runtime.retention().memory();
            let text = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or_default();
            let answer = match name.as_str() {
                "remember" => {
                    let scope = input
                        .get("scope")
                        .and_then(Value::as_str)
                        .unwrap_or(PRINCIPAL_SCOPE);
                    memory
                        .remember(&ctx.session_id, text("text"), scope, Some(&ctx.call_id))
                        .await
                        .map(|m| json!({"memoryId": m.id, "scope": m.scope}))
                }
                "recall" => {
                    let limit = input
                        .get("limit")
                        .and_then(Value::as_u64)
                        .map_or(RECALL_DEFAULT, |l| usize::try_from(l).unwrap_or(RECALL_MAX));
                    match runtime.sessions().get(&ctx.session_id).await {
                        Ok(session) => {
                            let owner = session.meta().owner.clone();
                            memory
                                .recall_in(&owner.principal_id, Some(&owner), text("query"), limit)
                                .await
                                .map(|found| {
                                    json!({"memories": found.iter().map(|m| json!({
                                        "id": m.id, "text": m.text, "scope": m.scope, "updatedAt": m.updated_at
                                    })).collect::<Vec<_>>()})
                                })
                        }
                        Err(e) => Err(e),
                    }
                }
                _ => memory
                    .forget(&ctx.session_id, text("id"), Some(&ctx.call_id))
                    .await
                    .map(|()| json!({"forgotten": text("id")})),
            };
            match answer {
                Ok(output) => ToolOutput {
                    output,
                    is_error: false,
                },
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}
