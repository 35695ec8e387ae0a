//! One command path: every request to a session (a message, a stop, a
//! reminder's wake, an approval decision, a client's tool results, a
//! deterministic tool call) is a
//! [`SessionCommand`]. [`AgentRuntime::dispatch`] applies it here, or, on
//! a shared database when another live host holds the session, routes it
//! there (`mailbox.rs`), whose mailbox loop reaches the same
//! [`AgentRuntime::apply`]: admission, token rotation and ownership checks
//! are always the holder's.

use crate::error::Result;
use crate::requests::FollowUp;
use crate::runtime::AgentRuntime;
use crate::session_command::{Outcome, SessionCommand, held_elsewhere};

/// The one command path, a part of the runtime: every request to a
/// session is a [`SessionCommand`] that [`Commands::dispatch`] applies
/// here, or, on a shared store when another live host holds the
/// session, routes through the mailbox to that host, whose mailbox loop
/// reaches the same [`Commands::apply`]; with the leases it takes and
/// releases and the sweeper that takes over a dead host's sessions.
/// Reached through [`AgentRuntime::commands`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Commands<'a> {
    pub(crate) rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// The one command path (crate-internal).
    pub(crate) fn commands(&self) -> Commands<'_> {
        Commands { rt: self }
    }
}

impl Commands<'_> {
    /// Applies `command` to session `id` on the host that runs it: here,
    /// or routed to the lease holder on a shared database.
    pub(crate) async fn dispatch(&self, id: &str, command: SessionCommand) -> Result<Outcome> {
        let routed = self.rt.inner.shared.is_some().then(|| command.clone());
        let here = self.apply(id, command).await;
        match routed {
            Some(command) if held_elsewhere(&here) => self.route(id, command).await,
            _ => here,
        }
    }

    /// Applies `command` on this host: the one door of every entry point
    /// and of routed requests. [`agentkit_store::SharedError::Busy`] when another
    /// live host holds the session (nothing changed then).
    pub(crate) async fn apply(&self, id: &str, command: SessionCommand) -> Result<Outcome> {
        match command {
            SessionCommand::Message {
                owner,
                message,
                continuation_token,
                admission,
                workspace_files,
                client_tools,
            } => {
                let follow = FollowUp {
                    owner,
                    message,
                    continuation_token,
                    admission,
                    workspace_files,
                    client_tools,
                };
                self.rt
                    .turns()
                    .admit_follow_up(id, follow)
                    .await
                    .map(Outcome::accepted)
            }
            SessionCommand::Stop { owner } => {
                let stopped = self.rt.turns().interrupt(id, &owner).await;
                stopped.map(|interrupted| Outcome::Stopped { interrupted })
            }
            SessionCommand::Wake { message } => self
                .rt
                .turns()
                .admit_wake(id, message)
                .await
                .map(Outcome::accepted),
            SessionCommand::Decision {
                owner,
                call_id,
                decision,
            } => {
                let resolved = self
                    .rt
                    .approvals()
                    .decide(id, &call_id, decision, &owner)
                    .await;
                resolved.map(|r| Outcome::Resolved {
                    call_id: r.call_id,
                    approved: r.decision == "approve",
                    by: r.by,
                    resumed: r.resumed,
                })
            }
            SessionCommand::ClientResults { owner, results } => {
                let answered = self.rt.approvals().answer_here(id, &owner, results).await;
                answered.map(|a| Outcome::Answered {
                    answered: a.answered,
                    resumed: a.resumed,
                })
            }
            SessionCommand::ToolCall {
                owner,
                name,
                input,
                origin,
            } => {
                let called = self
                    .rt
                    .tool_calls()
                    .run_call(&name, input, Some((id, &owner)), origin.into_origin())
                    .await;
                called.map(|call| Outcome::Called { call })
            }
        }
    }
}
