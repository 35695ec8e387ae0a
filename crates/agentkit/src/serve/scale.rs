//! Serving on a database shared with other hosts (`--database-url`): the
//! connection, the migrations applied at start, and the delivery ledger
//! the channel packs share.

use agentkit_pg::PgBackend;
use agentkit_runtime::SharedBackend;

use crate::error::Result;

/// Connects to `url` and migrates it. `None` without a URL: this host's
/// files, as always.
pub(crate) async fn open(url: Option<&str>) -> Result<Option<PgBackend>> {
    let Some(url) = url else {
        return Ok(None);
    };
    let backend = PgBackend::open(url).await?;
    tracing::info!(
        database = %backend.database().target(),
        host = %backend.owner(),
        "sessions, event logs and leases are shared through PostgreSQL"
    );
    Ok(Some(backend))
}

/// The shared delivery ledger and channel state of agent `slug`'s
/// channels.
pub(crate) fn ledger(backend: &PgBackend, slug: &str) -> std::sync::Arc<Ledger> {
    std::sync::Arc::new(Ledger {
        db: backend.database().clone(),
        agent: slug.to_owned(),
    })
}

#[derive(Debug)]
pub(crate) struct Ledger {
    db: agentkit_pg::Database,
    agent: String,
}

impl agentkit_channels::DeliveryLedger for Ledger {
    fn first_delivery<'a>(
        &'a self,
        channel: &'a str,
        pack: &'a str,
        id: &'a str,
    ) -> futures_util::future::BoxFuture<'a, std::result::Result<bool, String>> {
        Box::pin(async move {
            agentkit_pg::first_delivery(&self.db, &self.agent, channel, pack, id)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

impl agentkit_channels::ChannelStates for Ledger {
    fn get<'a>(
        &'a self,
        channel: &'a str,
        session: &'a str,
    ) -> futures_util::future::BoxFuture<'a, std::result::Result<Option<serde_json::Value>, String>>
    {
        Box::pin(async move {
            let text = agentkit_pg::channel_state(&self.db, &self.agent, channel, session)
                .await
                .map_err(|e| e.to_string())?;
            Ok(text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::Null)))
        })
    }

    fn set<'a>(
        &'a self,
        channel: &'a str,
        session: &'a str,
        value: &'a serde_json::Value,
    ) -> futures_util::future::BoxFuture<'a, std::result::Result<(), String>> {
        Box::pin(async move {
            agentkit_pg::set_channel_state(
                &self.db,
                &self.agent,
                channel,
                session,
                &value.to_string(),
            )
            .await
            .map_err(|e| e.to_string())
        })
    }
}
