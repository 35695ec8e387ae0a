//! Socket Mode: the pack asks `apps.connections.open` (with the app
//! token) for a WebSocket URL, connects, and acknowledges every envelope
//! the moment it arrives, before any work; events then take the same path
//! as over HTTP (durable `event_id` dedupe, work after the ack) and
//! interactive payloads resolve approvals. A `disconnect` message (Slack
//! refreshes connections every few hours), a closed or dropped socket, or
//! a silent one reconnects with a fresh URL, backing off while failures
//! repeat. It runs until the channel stops.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::Pack;
use super::client::SlackApi;
use crate::api::ChannelContext;
use crate::pack::text;

/// The first wait after a failure; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A socket that says nothing (not even a ping) this long is dead.
const SILENCE: Duration = Duration::from_secs(120);

/// The principal's authenticator for events that came over the socket
/// (the app token authenticated the connection).
const AUTHENTICATOR: &str = "slackSocketMode";

/// Why one connection ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Slack asked (`disconnect`): reconnect at once.
    Asked,
    /// Closed, dropped or silent after a `hello`: reconnect soon.
    Dropped,
    /// It never said `hello`, or could not be opened: back off.
    Failed,
    Stopped,
}

pub(super) async fn run(pack: Arc<Pack>, ctx: ChannelContext, app_token: String) {
    let opener = SlackApi::new(&pack.api_url, &app_token);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let ended = tokio::select! {
            e = connection(&pack, &ctx, &opener) => e,
            () = pack.stop.cancelled() => Ended::Stopped,
        };
        let wait = match ended {
            Ended::Stopped => return,
            Ended::Asked => Duration::ZERO,
            Ended::Dropped => {
                backoff = FIRST_BACKOFF;
                FIRST_BACKOFF
            }
            Ended::Failed => {
                let w = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                w
            }
        };
        tracing::info!(channel = %pack.id, ended = ?ended, wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX), "Slack Socket Mode reconnects");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = pack.stop.cancelled() => return,
        }
    }
}

/// One connection, from `apps.connections.open` to its end.
async fn connection(pack: &Arc<Pack>, ctx: &ChannelContext, opener: &SlackApi) -> Ended {
    let url = match opener.call("apps.connections.open", &json!({})).await {
        Ok(v) => text(&v, "url").to_owned(),
        Err(e) => {
            tracing::warn!(channel = %pack.id, error = %e, "cannot open a Slack Socket Mode connection");
            return Ended::Failed;
        }
    };
    let mut ws = match tokio_tungstenite::connect_async(url.as_str()).await {
        Ok((ws, _)) => ws,
        Err(e) => {
            tracing::warn!(channel = %pack.id, error = %e, "cannot connect the Slack Socket Mode WebSocket");
            return Ended::Failed;
        }
    };
    let mut greeted = false;
    loop {
        let frame = match tokio::time::timeout(SILENCE, ws.next()).await {
            Err(_) => {
                tracing::warn!(channel = %pack.id, "the Slack socket went silent");
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                tracing::info!(channel = %pack.id, error = %e, "the Slack socket dropped");
                break;
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let body = match frame {
            Message::Text(t) => t.to_string(),
            Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            Message::Ping(p) => {
                let _ = ws.send(Message::Pong(p)).await;
                continue;
            }
            Message::Close(_) => break,
            _ => continue,
        };
        let Ok(msg) = serde_json::from_str::<Value>(&body) else {
            tracing::warn!(channel = %pack.id, "a Slack socket message is not JSON");
            continue;
        };
        // Acknowledge first: Slack redelivers what is not acknowledged
        // within a few seconds.
        if let Some(id) = msg.get("envelope_id").and_then(Value::as_str) {
            let ack = json!({"envelope_id": id}).to_string();
            if let Err(e) = ws.send(Message::text(ack)).await {
                tracing::info!(channel = %pack.id, error = %e, "cannot acknowledge a Slack envelope");
                break;
            }
        }
        match text(&msg, "type") {
            "hello" => {
                greeted = true;
                tracing::info!(channel = %pack.id, "Slack Socket Mode connected");
            }
            "disconnect" => {
                tracing::info!(channel = %pack.id, reason = text(&msg, "reason"), "Slack asks to reconnect");
                let _ = ws.close(None).await;
                return Ended::Asked;
            }
            "events_api" => {
                let Some(payload) = msg.get("payload").cloned() else {
                    continue;
                };
                if let Err(e) = pack.event_callback(ctx, payload, AUTHENTICATOR) {
                    tracing::warn!(channel = %pack.id, error = %e, "cannot record a Slack event");
                }
            }
            "interactive" => {
                let Some(payload) = msg.get("payload").cloned() else {
                    continue;
                };
                let (p, c) = (pack.clone(), ctx.clone());
                ctx.wait_until(async move { p.interactive(&c, &payload, AUTHENTICATOR).await });
            }
            _ => {}
        }
    }
    if greeted {
        Ended::Dropped
    } else {
        Ended::Failed
    }
}
