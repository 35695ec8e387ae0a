//! agentkit channels: how the world outside reaches an agent's sessions.
//!
//! The crate owns the Rust channel API ([`ChannelDefinition`]: typed
//! routes with JSON Schemas, handler arguments, event handlers with
//! per-session state, `on_start` / `on_stop`), the host that mounts
//! channels for one agent ([`ChannelHost`]: route matching, the auth chain
//! over the raw request, schema validation, event routing from the store's
//! tap), declarative webhook channels built on that API, event deliveries,
//! and the GitHub, GitLab, Bitbucket and Slack packs (their shared rules,
//! dedup, host tasks and turns live once in `pack.rs`; Slack adds Socket
//! Mode and streamed thread replies in `slack/`).
//!
//! It does not know sessions, the harness or HTTP frameworks: it reaches
//! sessions through the [`SessionHost`] trait, which the facade implements
//! over the runtime, and it sees requests as plain [`ChannelRequest`]s.

mod api;
mod bitbucket;
mod check;
mod deliver;
mod env;
mod error;
mod github;
mod gitlab;
mod host;
mod pack;
mod slack;
mod state;
mod template;
mod webhook;

pub use api::{
    ApprovalDecision, ChannelContext, ChannelDefinition, ChannelResponse, ChannelSession,
    ChannelStates, DeliveryLedger, EventArgs, EventHandler, FormBodies, Handler, HandlerArgs,
    HandlerOutput, ResolvedApproval, RouteDef, SendOptions, SendRequest, SessionHost, SessionInfo,
    StartHandler, StopHandler, TurnReply, turn_outcome,
};
pub use bitbucket::{BitbucketOptions, bitbucket_channel, bitbucket_events};
pub use check::pack_diagnostics;
pub use deliver::{Deliverer, sign};
pub use env::{Env, EnvFn};
pub use error::{Error, Result};
pub use github::{GithubClient, GithubOptions, github_channel, github_client, github_events};
pub use gitlab::{GitlabOptions, gitlab_channel, gitlab_events};
pub use host::{ChannelHost, ChannelHostOptions, ChannelRequest};
pub use slack::{
    SlackCheck, SlackClient, SlackManifestOptions, SlackOptions, slack_app_manifest, slack_channel,
    slack_client, slack_doctor, slack_env_example, slack_events,
};
pub use template::{render, render_value};
pub use webhook::webhook_channel;
