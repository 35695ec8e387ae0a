//! One PostgreSQL database: a pool of connections for statements, and
//! one dedicated connection per process that `LISTEN`s for appended
//! events and wakes the followers of every session.

use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentkit_store::MailSignal;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::tls::{connector, split_url};

use crate::error::{Error, Result};

/// How long opening one connection may take when the URL says nothing.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a statement waits for a free pooled connection.
const POOL_WAIT: Duration = Duration::from_secs(10);
/// Connections per process.
const POOL_SIZE: usize = 16;
/// The channel appends `NOTIFY` on.
pub(crate) const EVENTS_CHANNEL: &str = "agentkit_events";
/// The channel the mailbox `NOTIFY`s on: a request posted
/// (`posted <agent> <session>`) or answered (`done <id>`).
pub(crate) const MAILBOX_CHANNEL: &str = "agentkit_mailbox";
/// How long the listener waits before reconnecting after losing its
/// connection.
const RELISTEN_AFTER: Duration = Duration::from_millis(500);

/// A log grew: `(agent, session, its length now)`, with the events that
/// made it grow when this host appended them (its followers take them
/// from there instead of reading the table back). `None` after the
/// listener reconnected (notifications may have been missed meanwhile:
/// every follower reads the table again).
pub(crate) type Grown = Option<Arc<GrownLog>>;

/// One log's growth.
#[derive(Debug)]
pub(crate) struct GrownLog {
    pub(crate) agent: String,
    pub(crate) session: String,
    pub(crate) len: u64,
    /// The appended events in the wire shape, ending at `len`: only for
    /// this host's own appends.
    pub(crate) events: Option<Arc<[Arc<agentkit_protocol::Event>]>>,
}

/// A pooled PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    config: tokio_postgres::Config,
    /// TLS as the URL's `sslmode` asked (plain without one).
    tls: MakeRustlsConnect,
    target: String,
    /// Every notification of a grown log, for the followers of this
    /// process (started on first use).
    grown: broadcast::Sender<Grown>,
    /// Every mailbox notification, for this process.
    mail: broadcast::Sender<MailSignal>,
    listener: OnceLock<tokio::task::JoinHandle<()>>,
    /// The group commit of the turn's write path (`group.rs`).
    group: crate::group::Group,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.get() {
            listener.abort();
        }
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("target", &self.inner.target)
            .finish_non_exhaustive()
    }
}

/// An error and its causes, `: `-separated (a failed TLS handshake says
/// why: `invalid peer certificate: UnknownIssuer`).
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// `host:port/database` of a URL, with no user or password: what logs
/// and errors may show.
pub fn redacted(url: &str) -> String {
    let url = split_url(url).map_or_else(|_| url.to_owned(), |(rest, _)| rest);
    match tokio_postgres::Config::from_str(&url) {
        Ok(config) => target_of(&config),
        Err(_) => "an unparseable URL".to_owned(),
    }
}

fn target_of(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".to_owned());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

impl Database {
    /// Parses `url` (`postgres://user@host:port/database`) and checks that
    /// a connection can be made. Its `sslmode` (`disable`, the default
    /// here; `prefer`; `require`; `verify-ca` and `verify-full` with
    /// `sslrootcert=<PEM file>`) asks for TLS, with rustls.
    pub async fn connect(url: &str) -> Result<Database> {
        let (url, mode) = split_url(url)?;
        let mut config = tokio_postgres::Config::from_str(&url).map_err(|e| Error::Url {
            message: format!("not a PostgreSQL URL (postgres://user@host:port/database): {e}"),
        })?;
        config.ssl_mode(mode.ssl_mode());
        let tls = connector(&mode)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("agentkit");
        }
        let target = target_of(&config);
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| Error::Connect {
                target: target.clone(),
                message: e.to_string(),
            })?;
        let db = Database {
            inner: Arc::new(Inner {
                pool,
                config,
                tls,
                target,
                grown: broadcast::channel(4096).0,
                mail: broadcast::channel(1024).0,
                listener: OnceLock::new(),
                group: crate::group::Group::default(),
            }),
        };
        drop(db.client().await?);
        Ok(db)
    }

    /// Whether this pool's connections are encrypted (TLS), as the
    /// server sees one of them (`pg_stat_ssl`).
    pub async fn encrypted(&self) -> Result<bool> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), FALSE)",
                &[],
            )
            .await
            .map_err(Error::query("read the connection's TLS state"))?;
        Ok(row.get(0))
    }

    /// `host:port/database`, without credentials.
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// Runs `sql` in the next group commit (`group.rs`): its row, if it
    /// returned one, once committed. `key` (agent, session) orders the
    /// group.
    pub(crate) async fn grouped(
        &self,
        sql: &'static str,
        key: (String, String),
        params: Arc<dyn crate::group::Params>,
    ) -> Result<Option<tokio_postgres::Row>> {
        self.inner
            .group
            .run(&self.inner.pool, &self.inner.target, sql, key, params)
            .await
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Object> {
        self.inner.pool.get().await.map_err(|e| Error::Connect {
            target: self.inner.target.clone(),
            message: with_sources(&e),
        })
    }

    /// A connection of its own (not pooled), for session-level state such
    /// as an advisory lock: it ends, and PostgreSQL releases that state,
    /// when the returned client is dropped.
    pub(crate) async fn dedicated(&self) -> Result<tokio_postgres::Client> {
        let (client, connection) = self
            .inner
            .config
            .connect(self.inner.tls.clone())
            .await
            .map_err(|e| Error::Connect {
                target: self.inner.target.clone(),
                message: e.to_string(),
            })?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a dedicated PostgreSQL connection ended");
            }
        });
        Ok(client)
    }

    /// Notifications of grown logs, from now on (the listener starts on
    /// the first call).
    pub(crate) fn grown(&self) -> broadcast::Receiver<Grown> {
        let receiver = self.inner.grown.subscribe();
        self.start_listener();
        receiver
    }

    /// Mailbox notifications, from now on (the listener starts on the
    /// first call).
    pub fn mail(&self) -> broadcast::Receiver<MailSignal> {
        let receiver = self.inner.mail.subscribe();
        self.start_listener();
        receiver
    }

    fn start_listener(&self) {
        self.inner.listener.get_or_init(|| {
            tokio::spawn(listen(
                self.inner.config.clone(),
                self.inner.tls.clone(),
                self.inner.target.clone(),
                self.inner.grown.clone(),
                self.inner.mail.clone(),
            ))
        });
    }

    /// Tells this process's mailbox waiters about `signal` (without
    /// waiting for the database's notification to come back).
    pub(crate) fn announce_mail(&self, signal: MailSignal) {
        let _ = self.inner.mail.send(signal);
    }

    /// Tells this process's followers that a log grew by `events` (this
    /// host's committed append, ending at `len`), without waiting for the
    /// database's notification to come back.
    pub(crate) fn announce(
        &self,
        agent: &str,
        session: &str,
        len: u64,
        events: Arc<[Arc<agentkit_protocol::Event>]>,
    ) {
        let _ = self.inner.grown.send(Some(Arc::new(GrownLog {
            agent: agent.to_owned(),
            session: session.to_owned(),
            len,
            events: Some(events),
        })));
    }
}

/// `LISTEN`s on [`EVENTS_CHANNEL`] for as long as the process runs,
/// reconnecting when the connection drops.
async fn listen(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    target: String,
    grown: broadcast::Sender<Grown>,
    mail: broadcast::Sender<MailSignal>,
) {
    loop {
        match config.connect(tls.clone()).await {
            Ok((client, mut connection)) => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let pump = tokio::spawn(async move {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                    use futures_util::StreamExt as _;
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(message) => {
                                if tx.send(message).is_err() {
                                    break;
                                }
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "the PostgreSQL listener lost its connection");
                                break;
                            }
                        }
                    }
                });
                match client
                    .batch_execute(&format!(
                        "LISTEN {EVENTS_CHANNEL}; LISTEN {MAILBOX_CHANNEL}"
                    ))
                    .await
                {
                    Ok(()) => {
                        // Whatever was appended while we were not listening
                        // is in the table: followers read it again.
                        let _ = grown.send(None);
                        let _ = mail.send(MailSignal::Missed);
                        while let Some(message) = rx.recv().await {
                            let AsyncMessage::Notification(n) = message else {
                                continue;
                            };
                            if n.channel() == MAILBOX_CHANNEL {
                                if let Some(signal) = parse_mail(n.payload()) {
                                    let _ = mail.send(signal);
                                }
                            } else if let Some((agent, session, len)) = parse_grown(n.payload()) {
                                let _ = grown.send(Some(Arc::new(GrownLog {
                                    agent,
                                    session,
                                    len,
                                    events: None,
                                })));
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "LISTEN failed"),
                }
                pump.abort();
            }
            Err(e) => {
                tracing::warn!(target = %target, error = %e, "the PostgreSQL listener cannot connect");
            }
        }
        tokio::time::sleep(RELISTEN_AFTER).await;
    }
}

/// `agent session len`, as appends notify.
fn parse_grown(payload: &str) -> Option<(String, String, u64)> {
    let mut parts = payload.rsplitn(3, ' ');
    let len = parts.next()?.parse().ok()?;
    let session = parts.next()?.to_owned();
    let agent = parts.next()?.to_owned();
    Some((agent, session, len))
}

/// `posted agent session` or `done id`, as the mailbox notifies.
fn parse_mail(payload: &str) -> Option<MailSignal> {
    let mut parts = payload.split(' ');
    match parts.next()? {
        "posted" => {
            let agent = parts.next()?.to_owned();
            let session = parts.next()?.to_owned();
            Some(MailSignal::Posted { agent, session })
        }
        "done" => Some(MailSignal::Done {
            id: parts.next()?.to_owned(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(
            redacted("postgres://bob:s3cret@db.internal:6543/prod"),
            "db.internal:6543/prod"
        );
        assert_eq!(redacted("not a url at all \u{0}"), "an unparseable URL");
    }

    #[test]
    fn notifications_parse() {
        assert_eq!(
            parse_grown("my-agent ses_1 42"),
            Some(("my-agent".into(), "ses_1".into(), 42))
        );
        assert_eq!(parse_grown("garbage"), None);
        assert_eq!(
            parse_mail("posted my-agent ses_1"),
            Some(MailSignal::Posted {
                agent: "my-agent".into(),
                session: "ses_1".into()
            })
        );
        assert_eq!(
            parse_mail("done mail_1"),
            Some(MailSignal::Done {
                id: "mail_1".into()
            })
        );
        assert_eq!(parse_mail("other"), None);
    }
}
