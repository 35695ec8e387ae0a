//! Admission, the turn engine's front door: a new session created, a
//! message continuing one (as its owner, or as the owner a channel key
//! names), a reminder's wake, and a stop; each admitted under the
//! session's admission policy here, on the host that runs it.

use std::sync::Arc;

use agentkit_events::NewEvent;
use agentkit_manifest::Admission;
use agentkit_protocol::{AbAssigned, EventData, SessionId, SessionStarted};

use crate::error::{Error, Result};
use crate::meta::{HTTP_CHANNEL, Owner, SessionMeta, SessionMode};
use crate::requests::{Accepted, FollowUp, SendRequest};
use crate::session::Session;
use crate::util::{mint_token, new_id, now};
use crate::worker::Turns;
use crate::workspace;

impl Turns<'_> {
    /// Follows up session `id`, which continuation key `key` maps to, as
    /// the session's owner (the channel authenticated the sender).
    pub(crate) async fn continue_as_owner(
        &self,
        id: &str,
        key: String,
        req: SendRequest,
    ) -> Result<Accepted> {
        let owner = self.rt.session_meta(id).await?.owner;
        let follow = FollowUp {
            owner,
            message: req.message,
            continuation_token: Some(key),
            admission: req.admission,
            workspace_files: req.workspace_files,
            client_tools: req.client_tools,
        };
        self.rt.follow_up(id, follow).await
    }

    /// Refuses client tools a turn of session `id` could not offer: a
    /// name the agent's tools (its files, built-ins, Rust and MCP tools)
    /// already use, a name twice, or parameters that are not a JSON
    /// Schema object.
    pub(crate) async fn check_client_tools(
        &self,
        id: &str,
        tools: &[agentkit_protocol::ClientTool],
    ) -> Result<()> {
        if tools.is_empty() {
            return Ok(());
        }
        let agent = &self.rt.inner.agent;
        let dynamic = self.rt.dynamic_tools(id).await;
        let (_, offered) = agentkit_harness::request_context(agent, &dynamic, None);
        let bad = |message: String| Err(Error::BadRequest { message });
        for (i, tool) in tools.iter().enumerate() {
            let name = tool.name.as_str();
            let well_formed = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !well_formed {
                return bad(format!(
                    "client tool name `{name}` must be 1 to 64 ASCII letters, digits, `_` or `-`"
                ));
            }
            if agent.tool(name).is_some() || offered.iter().any(|o| o.name == name) {
                return bad(format!(
                    "client tool `{name}` clashes with the agent's own tool of that name: rename the client's tool"
                ));
            }
            if tools[..i].iter().any(|t| t.name == name) {
                return bad(format!("client tool `{name}` is declared twice"));
            }
            let usable = tool.parameters.is_object()
                && agentkit_manifest::schema_errors(&tool.parameters, &serde_json::Value::Null)
                    .is_ok();
            if !usable {
                return bad(format!(
                    "the parameters of client tool `{name}` must be a JSON Schema object (draft 2020-12) that compiles"
                ));
            }
        }
        Ok(())
    }

    /// A new session for `req` (its key, if any, is free).
    pub(crate) async fn create_new(
        &self,
        req: SendRequest,
        as_of: Option<String>,
    ) -> Result<Accepted> {
        let id = SessionId::parse(&new_id("ses"))?;
        // Refused before the session exists.
        self.check_client_tools(id.as_str(), &req.client_tools)
            .await?;
        let token = req.continuation.clone().unwrap_or_else(mint_token);
        let workspace_dir = self
            .rt
            .inner
            .agent
            .config
            .local
            .cwd
            .as_ref()
            .map(|cwd| cwd.join(id.as_str()).to_string_lossy().into_owned());
        let meta = SessionMeta {
            id: id.as_str().to_owned(),
            channel: req.channel.clone(),
            mode: req.mode,
            owner: req.owner.as_session_owner(),
            continuation_token: token.clone(),
            created_at: now(),
            title: req.title.clone(),
            purpose: req.purpose.clone(),
            dry_run: req.dry_run,
            workspace_dir,
            parked: false,
            as_of,
            output_schema: req.output_schema.clone(),
            forked_from: None,
            cost_usd: Some(0.0),
            cost_unknown: false,
            updated_at: None,
        };
        // The index row first (committed with whatever other sessions'
        // writes are queued), then the log, which makes the folder: a row
        // whose folder never came is dropped when it is next looked up.
        self.rt.sessions().index_put(&meta).await?;
        let session = self.rt.sessions().register(id.clone(), meta.clone(), false);
        // The log opens with `session.started` and the session's A/B
        // assignments, appended with its first message in one batch.
        let mut opening = vec![NewEvent::new(
            None,
            EventData::SessionStarted(SessionStarted {
                channel: meta.channel.clone(),
                mode: meta.mode.as_str().to_owned(),
                principal_id: meta.owner.principal_id.clone(),
                title: meta.title.clone(),
                purpose: meta.purpose.clone(),
                as_of: meta.as_of.clone(),
            }),
        )];
        // Enrolment: sticky per channel key (a conversation that starts a
        // new session keeps its variant), per principal where the
        // experiment says so, else per session. An eval session sticks to
        // its title (`eval <case> #<iteration>`), so a case's iteration
        // runs the same variant in every run and a recording replays.
        let eval_key = (meta.purpose.as_deref() == Some("eval"))
            .then_some(meta.title.as_deref())
            .flatten();
        let mut assignments = Vec::new();
        for experiment in &self.rt.inner.agent.experiments {
            let sticky = crate::ab::sticky_key(
                experiment,
                &meta.owner.principal_id,
                req.continuation.as_deref().or(eval_key),
                id.as_str(),
            );
            let assigned = crate::ab::assign(experiment, &sticky);
            opening.push(NewEvent::new(
                None,
                EventData::AbAssigned(AbAssigned {
                    experiment: assigned.experiment.clone(),
                    variant: assigned.variant.clone(),
                }),
            ));
            assignments.push(assigned);
        }
        self.rt
            .ab()
            .record_assignments(
                id.as_str(),
                &meta.owner.principal_id,
                meta.purpose.as_deref(),
                chrono::Utc::now().timestamp_millis(),
                assignments,
            )
            .await?;
        let (coalesced, start_index) = self
            .rt
            .turns()
            .accept_first(
                &session,
                opening,
                crate::requests::Incoming {
                    text: req.message,
                    client_tools: req.client_tools,
                },
                req.admission,
                req.workspace_files,
            )
            .await?;
        Ok(Accepted {
            session_id: id.as_str().to_owned(),
            continuation_token: token,
            is_new: true,
            coalesced,
            start_index,
        })
    }

    /// [`follow_up`](Self::follow_up) on this host only (its
    /// [`SessionCommand::Message`]): [`agentkit_store::SharedError::Busy`] when
    /// another live host holds the session (nothing changed then).
    pub(crate) async fn admit_follow_up(&self, id: &str, req: FollowUp) -> Result<Accepted> {
        if req.message.trim().is_empty() {
            return Err(Error::BadRequest {
                message: "`message` must not be empty".into(),
            });
        }
        workspace::check_relative_paths(&req.workspace_files)?;
        let session = self.rt.sessions().owned(id, &req.owner).await?;
        self.rt.turns().ready(&session).await?;
        // On a shared database, a session held by another host is refused
        // before its token rotates (the client keeps a usable token); a
        // message refused after that lets the lease go again.
        self.rt.commands().hold_lease(&session).await?;
        let accepted = self.follow_up_held(id, &session, req).await;
        if accepted.is_err() {
            self.rt.commands().release_if_idle(&session).await;
        }
        accepted
    }

    /// [`follow_up`](Self::follow_up) once the session is ready (and, on
    /// a shared database, held by this host).
    pub(crate) async fn follow_up_held(
        &self,
        id: &str,
        session: &Arc<Session>,
        req: FollowUp,
    ) -> Result<Accepted> {
        let from = (req.owner.is_operator()
            && session.meta().owner.principal_id != req.owner.principal_id)
            .then(|| req.owner.operator_label());
        let (token, rotated) = {
            let mut meta = session.meta();
            if meta.mode == SessionMode::Task {
                return Err(Error::TaskSession { id: id.to_owned() });
            }
            // A rejected message is not accepted, so it must not rotate the
            // token: check before rotating.
            if req.admission == Admission::Reject && session.state().is_busy() {
                return Err(Error::SessionBusy { id: id.to_owned() });
            }
            if meta.channel == HTTP_CHANNEL && from.is_some() && req.continuation_token.is_none() {
                // An operator who does not hold the owner's token sends
                // without one, and the token is not rotated: the owner's
                // next follow-up still holds the current one.
                (meta.continuation_token.clone(), None)
            } else if meta.channel == HTTP_CHANNEL {
                if req.continuation_token.as_deref() != Some(meta.continuation_token.as_str()) {
                    return Err(Error::StaleContinuation);
                }
                let fresh = mint_token();
                self.rt
                    .inner
                    .registry
                    .rekey(&meta.channel, &meta.continuation_token, &fresh, id);
                meta.continuation_token = fresh;
                (meta.continuation_token.clone(), Some(meta.clone()))
            } else {
                (meta.continuation_token.clone(), None)
            }
        };
        // The new token is answered only once the index holds it.
        if let Some(meta) = rotated {
            self.rt.sessions().index_put(&meta).await?;
        }
        let (coalesced, start_index) = self
            .rt
            .turns()
            .accept_from(
                session,
                crate::requests::Incoming {
                    text: req.message,
                    client_tools: req.client_tools,
                },
                req.admission,
                req.workspace_files,
                from,
            )
            .await?;
        Ok(Accepted {
            session_id: id.to_owned(),
            continuation_token: token,
            is_new: false,
            coalesced,
            start_index,
        })
    }

    /// [`stop`](Self::stop) on this host only (its
    /// [`SessionCommand::Stop`]).
    pub(crate) async fn interrupt(&self, id: &str, owner: &Owner) -> Result<bool> {
        let session = self.rt.sessions().owned(id, owner).await?;
        let by = (owner.is_operator() && session.meta().owner.principal_id != owner.principal_id)
            .then(|| owner.operator_label());
        let stopped = session.state().stop_by(by);
        if stopped {
            tracing::info!(session = %id, by = %owner.principal_id, operator = owner.is_operator(), "turn stopped");
        } else if let Some(shared) = &self.rt.inner.shared
            && let Some(holder) = shared.leases.holder(id).await?
        {
            // The turn runs on another host: saying "nothing ran" here
            // would be wrong; `dispatch` routes the stop there.
            return Err(agentkit_store::SharedError::Busy {
                session: id.to_owned(),
                holder,
            }
            .into());
        }
        Ok(stopped)
    }

    /// Wakes a chat session with `message` (a reminder firing), on this
    /// host (its [`SessionCommand::Wake`]): admitted with `coalesce`, so it
    /// never interrupts a turn in flight, and without rotating the
    /// session's continuation token.
    pub(crate) async fn admit_wake(&self, id: &str, message: String) -> Result<Accepted> {
        let session = self.rt.sessions().get(id).await?;
        let (mode, token) = {
            let meta = session.meta();
            (meta.mode, meta.continuation_token.clone())
        };
        if mode == SessionMode::Task {
            return Err(Error::TaskSession { id: id.to_owned() });
        }
        self.rt.turns().ready(&session).await?;
        self.rt.commands().hold_lease(&session).await?;
        let accepted = self
            .rt
            .turns()
            .accept(&session, message, Admission::Coalesce, Vec::new())
            .await;
        if accepted.is_err() {
            self.rt.commands().release_if_idle(&session).await;
        }
        let (coalesced, start_index) = accepted?;
        Ok(Accepted {
            session_id: id.to_owned(),
            continuation_token: token,
            is_new: false,
            coalesced,
            start_index,
        })
    }
}
