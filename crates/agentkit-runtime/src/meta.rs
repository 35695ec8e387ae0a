//! A session's metadata: who owns it, on which channel, in which mode, and
//! its current continuation token. Kept in the session index (the
//! `sessions` table of `agentkit.sqlite`); `session.json` files of state
//! written before the index are read once, when it is built.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The built-in HTTP channel's id.
pub const HTTP_CHANNEL: &str = "http";

/// Chat sessions wait for follow-ups; task sessions end after one turn.
pub use agentkit_protocol::SessionMode;

/// The principal that owns a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub principal_id: String,
    pub principal_type: String,
    pub authenticator: String,
    /// The principal's tenant (`[auth] tenant_claim`): a session records
    /// its creator's, and only principals of the same tenant (or none,
    /// for a tenant-less session) see it, unless they are [`admin`](Owner::admin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The principal is `admin` (the operator token, `--dev`'s loopback
    /// caller, `[auth.roles] admin`): it crosses tenants. Serialised for
    /// a command routed to another host, like `principalType`; never in
    /// a session's metadata ([`as_session_owner`](Owner::as_session_owner)
    /// clears it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
}

impl Owner {
    /// An operator (the operator token's holder, the loopback caller
    /// under `--dev`): past every ownership check of the agent's sessions.
    pub fn is_operator(&self) -> bool {
        self.principal_type == "operator"
    }

    /// The owner as a session stores it: an operator's sessions belong to
    /// its principal as a plain `user`, so the operator's reach is never
    /// inherited by whatever later acts as the session's owner (a channel
    /// key's follow-up, a reminder, a tool's host-bridge call).
    pub fn as_session_owner(&self) -> Owner {
        let mut owner = self.clone();
        if owner.is_operator() {
            owner.principal_type = "user".to_owned();
        }
        owner.admin = false;
        owner
    }

    /// Whether this principal may see anything of a session `session`
    /// owns: an admin any, anyone else the sessions of its own tenant
    /// (the tenant-less ones when it has none). Past this, the ownership
    /// check applies; a session of another tenant is answered as absent,
    /// so its id does not leak.
    pub fn sees_tenant_of(&self, session: &Owner) -> bool {
        self.admin || self.tenant == session.tenant
    }

    /// Which tenant's rows this principal may list: `None` for an admin
    /// (every tenant), else its own (`Some(None)`: the tenant-less rows).
    pub fn tenant_scope(&self) -> Option<Option<&str>> {
        (!self.admin).then_some(self.tenant.as_deref())
    }

    /// How an operator's actions are recorded (`by` of an approval
    /// decision, `from` of a message): `operator:<principalId>`.
    pub fn operator_label(&self) -> String {
        format!("operator:{}", self.principal_id)
    }

    pub fn from_auth(auth: &agentkit_auth::AuthContext) -> Owner {
        let principal_type = serde_json::to_value(auth.principal_type)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        Owner {
            principal_id: auth.principal_id.clone(),
            principal_type,
            authenticator: auth.authenticator.clone(),
            tenant: auth.tenant.clone(),
            admin: auth.role() == agentkit_auth::Role::Admin,
        }
    }
}

/// The stored metadata of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    pub id: String,
    pub channel: String,
    pub mode: SessionMode,
    pub owner: Owner,
    /// The current continuation token (rotated on each accepted HTTP
    /// follow-up; a channel's own key otherwise).
    pub continuation_token: String,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The working directory when `local.cwd` or a channel chose one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_dir: Option<String>,
    /// Tools that are not read-only answer stubs instead of running.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// A tool call may be waiting for approval: at start the runtime reads
    /// this session's log to arm approval timeouts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parked: bool,
    /// The instant the session is frozen at (RFC 3339, its own offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// This session's output schema, instead of the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// The session this one was forked from, and where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<agentkit_protocol::api::ForkedFrom>,
    /// What the session's ended turns cost in US dollars, kept as each
    /// turn ends (`None` until the first does, or while unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// A turn's cost was unknown (a model with no price): the total is too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_unknown: bool,
    /// The session's last activity (RFC 3339, UTC, milliseconds): stamped
    /// by every write of its index row (see `row_of`); absent in
    /// metadata written before it was kept (its creation stands in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

impl SessionMeta {
    /// What the session's tool calls know of where they come from: its
    /// channel, its continuation key (not on the built-in HTTP channel,
    /// whose rotating token is a credential) and its purpose.
    pub fn call_origin(&self) -> agentkit_harness::CallOrigin {
        agentkit_harness::CallOrigin {
            channel_id: Some(self.channel.clone()),
            continuation_key: (self.channel != HTTP_CHANNEL)
                .then(|| self.continuation_token.clone()),
            purpose: self.purpose.clone(),
            principal: None,
            schedule: None,
            model_turn: false,
        }
    }
}

pub(crate) fn load(path: &Path) -> Result<SessionMeta> {
    let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Io {
        action: "parse",
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// The session index row of `meta` (the shared store's), written now: its
/// last activity is this instant. The runtime writes a session's row when
/// it is created or forked, when an HTTP follow-up rotates its token, when
/// a tool call parks for approval or the last parked one is decided, and
/// at the end of each turn (completed, failed or interrupted).
pub(crate) fn row_of(meta: &SessionMeta) -> Result<agentkit_store::SessionRow> {
    row_at(meta, crate::util::now())
}

/// The session index row of `meta`, last active at `updated_at`.
pub(crate) fn row_at(meta: &SessionMeta, updated_at: String) -> Result<agentkit_store::SessionRow> {
    let stamped = SessionMeta {
        updated_at: Some(updated_at.clone()),
        ..meta.clone()
    };
    Ok(agentkit_store::SessionRow {
        id: meta.id.clone(),
        channel: meta.channel.clone(),
        continuation: meta.continuation_token.clone(),
        principal_id: meta.owner.principal_id.clone(),
        parked: meta.parked,
        meta: serde_json::to_string(&stamped).map_err(|e| Error::BadRequest {
            message: format!("cannot encode session metadata: {e}"),
        })?,
        updated_at,
    })
}

pub(crate) fn meta_of(json: &str) -> Option<SessionMeta> {
    serde_json::from_str(json).ok()
}
