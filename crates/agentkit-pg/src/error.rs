//! The one error type of the PostgreSQL backend.

/// Everything that can go wrong talking to PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database URL does not parse (its text is not repeated: it may
    /// hold a password).
    #[error("--database-url: {message}")]
    Url {
        /// What is wrong with it.
        message: String,
    },
    /// No connection could be made or taken from the pool.
    #[error("PostgreSQL at {target}: {message}")]
    Connect {
        /// The server, without credentials.
        target: String,
        message: String,
    },
    /// A statement failed.
    #[error("PostgreSQL: {action}: {source}")]
    Query {
        /// What we were doing.
        action: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database's schema is newer than this binary knows.
    #[error(
        "the database schema is at version {found}, newer than this binary's {known}: upgrade agentkit on this host (or point it at another database)"
    )]
    SchemaTooNew { found: i32, known: i32 },
    /// The database's schema is older than this binary needs and it was
    /// not migrated.
    #[error(
        "the database schema is at version {found}, this binary needs {known}: run `agentkit db migrate`"
    )]
    SchemaTooOld { found: i32, known: i32 },
    /// A row the request needs is not there (deleted meanwhile, say).
    #[error("PostgreSQL: {what}")]
    Missing { what: String },
    /// A stored row is not what it should be.
    #[error("PostgreSQL: corrupt row in {table}: {reason}")]
    Corrupt { table: &'static str, reason: String },
    /// An append was refused: this host does not hold the session's lease
    /// (another one took it over), so it must not write.
    #[error(
        "session `{session}`: this host lost its lease (fencing token {token}); it no longer writes"
    )]
    Fenced { session: String, token: i64 },
    /// Another live host holds the session's lease (a turn runs there).
    #[error("session `{session}` is held by another host ({holder}); retry shortly")]
    Busy { session: String, holder: String },
    /// Another host made the session of this channel key first.
    #[error("channel `{channel}`: another host started the session of this key first")]
    KeyTaken { channel: String },
    /// A task this store relies on ended (the server is stopping).
    #[error("PostgreSQL: {what} stopped")]
    Stopped { what: &'static str },
    /// Waiting for something took too long.
    #[error("PostgreSQL: {what} timed out after {seconds} s")]
    Timeout { what: &'static str, seconds: u64 },
}

impl Error {
    pub(crate) fn query(action: &'static str) -> impl FnOnce(tokio_postgres::Error) -> Error {
        move |source| Error::Query { action, source }
    }
}

/// This crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;
