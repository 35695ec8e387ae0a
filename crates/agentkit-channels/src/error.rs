//! The one error type of the crate, and how each error answers over HTTP.

use agentkit_protocol::{ErrorBody, ErrorCode};
use serde_json::{Map, Value, json};

/// What can go wrong while a channel handles a request or an event.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed (400).
    #[error("{message}")]
    BadRequest { message: String },
    /// The body or query does not match the route's schema (400); every
    /// violation with its JSON pointer.
    #[error("{what} does not match the route's schema")]
    Schema {
        what: &'static str,
        errors: Vec<(String, String)>,
    },
    /// The body's media type is not one the channel reads (415).
    #[error("{message}")]
    UnsupportedMediaType { message: String },
    /// No auth policy admitted the request (401).
    #[error("no auth policy admitted the request")]
    Unauthorized,
    /// No route of the channel matches (404; 405 when only the method is
    /// wrong).
    #[error("{message}")]
    NoRoute { status: u16, message: String },
    /// The session host refused or failed (its own status and code).
    #[error("{message}")]
    Session {
        status: u16,
        code: ErrorCode,
        message: String,
        details: Option<Box<Map<String, Value>>>,
    },
    /// A template did not render.
    #[error("template `{field}`: {message}")]
    Template { field: String, message: String },
    /// A capability of the channel contract this release does not have.
    #[error("{what} is not available in this release")]
    NotAvailable { what: String },
    /// Channel settings that cannot be served.
    #[error("channel `{channel}`: {message}")]
    Config { channel: String, message: String },
    /// A call to a provider API (GitHub, a delivery URL) failed.
    #[error("{message}")]
    Upstream { message: String },
    /// Reading or writing channel state on disk failed.
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn bad_request(message: impl Into<String>) -> Error {
        Error::BadRequest {
            message: message.into(),
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: &std::path::Path,
        source: std::io::Error,
    ) -> Error {
        Error::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    /// The HTTP status this error answers with.
    pub fn status(&self) -> u16 {
        match self {
            Error::BadRequest { .. } | Error::Schema { .. } | Error::Template { .. } => 400,
            Error::Unauthorized => 401,
            Error::UnsupportedMediaType { .. } => 415,
            Error::NoRoute { status, .. } | Error::Session { status, .. } => *status,
            Error::NotAvailable { .. } => 501,
            Error::Upstream { .. } => 502,
            Error::Config { .. } | Error::Io { .. } => 500,
        }
    }

    /// The machine-readable code of the JSON error body.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::BadRequest { .. } | Error::UnsupportedMediaType { .. } => ErrorCode::BadRequest,
            Error::Schema { .. } => ErrorCode::InvalidInput,
            Error::Unauthorized => ErrorCode::Unauthorized,
            Error::NoRoute { status: 405, .. } => ErrorCode::MethodNotAllowed,
            Error::NoRoute { .. } => ErrorCode::NotFound,
            Error::Session { code, .. } => *code,
            Error::Template { .. } => ErrorCode::TemplateError,
            Error::NotAvailable { .. } => ErrorCode::NotImplemented,
            Error::Upstream { .. } => ErrorCode::UpstreamError,
            Error::Config { .. } | Error::Io { .. } => ErrorCode::Internal,
        }
    }

    /// `{"ok": false, "error": {"code", "message", ...}}`; server errors
    /// keep their detail for the log.
    pub fn to_body(&self) -> Value {
        let message = if self.status() >= 500 && self.status() != 501 && self.status() != 502 {
            tracing::error!(error = %self, "channel request failed");
            "internal error; see the server log".to_owned()
        } else {
            self.to_string()
        };
        let mut details = Map::new();
        match self {
            Error::Schema { errors, .. } => {
                let list: Vec<Value> = errors
                    .iter()
                    .map(|(path, message)| json!({"path": path, "message": message}))
                    .collect();
                details.insert("errors".into(), Value::Array(list));
            }
            Error::Session {
                details: Some(d), ..
            } => details.extend((**d).clone()),
            _ => {}
        }
        ErrorBody::with_details(self.code(), message, details).to_json()
    }
}
