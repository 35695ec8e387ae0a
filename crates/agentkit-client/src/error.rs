//! What can go wrong talking to a server or reading an event log.

use std::fmt;

/// What can go wrong talking to a server. Every message names the URL.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status.
    #[error("{method} {url} returned {status}{}: {message}", code_suffix(.code))]
    Status {
        method: &'static str,
        url: String,
        status: u16,
        /// The `error` code of the JSON body (empty when the body had none).
        code: String,
        message: String,
    },
    /// The request never got an answer (connection refused, reset, ...).
    #[error("{method} {url} failed")]
    Transport {
        method: &'static str,
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The answer was not the JSON the contract promises.
    #[error("{method} {url} returned an unexpected body")]
    Body {
        method: &'static str,
        url: String,
        #[source]
        source: serde_json::Error,
    },
    /// A line of an NDJSON answer was not a JSON object.
    #[error("{url}: bad event stream")]
    Ndjson {
        url: String,
        #[source]
        source: NdjsonError,
    },
    /// The process's HTTP client could not be built.
    #[error(transparent)]
    HttpClient(#[from] agentkit_plumbing::HttpClientError),
    /// The server closed the stream before the turn settled.
    #[error("{url}: the stream ended before the turn settled")]
    StreamEnded { url: String },
    /// A multi-agent host serves several agents and none was chosen.
    #[error("{url} serves several agents ({}); choose one with --agent SLUG, or use the agent's own URL ({url}/SLUG)", .slugs.join(", "))]
    AmbiguousAgent { url: String, slugs: Vec<String> },
    /// The chosen agent is not on the host.
    #[error("{url} has no agent `{slug}` (it serves {})", .slugs.join(", "))]
    UnknownAgent {
        url: String,
        slug: String,
        slugs: Vec<String>,
    },
}

fn code_suffix(code: &str) -> String {
    if code.is_empty() {
        String::new()
    } else {
        format!(" ({code})")
    }
}

impl Error {
    /// The HTTP status, for [`Error::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error code of the JSON body, for [`Error::Status`].
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Status { code, .. } => Some(code),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A line of an NDJSON log that is not a JSON object.
#[derive(Debug)]
pub struct NdjsonError {
    /// 1-based.
    pub line: usize,
    pub reason: NdjsonErrorReason,
}

/// Why an NDJSON line was rejected.
#[derive(Debug)]
pub enum NdjsonErrorReason {
    Json(serde_json::Error),
    NotAnObject,
}

impl fmt::Display for NdjsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            NdjsonErrorReason::Json(e) => write!(f, "line {} is not JSON: {e}", self.line),
            NdjsonErrorReason::NotAnObject => {
                write!(f, "line {} is not a JSON object", self.line)
            }
        }
    }
}

impl std::error::Error for NdjsonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.reason {
            NdjsonErrorReason::Json(e) => Some(e),
            NdjsonErrorReason::NotAnObject => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_errors_name_url_code_and_message() {
        let e = Error::Status {
            method: "POST",
            url: "http://127.0.0.1:1/a/v1/session/ses_1".to_owned(),
            status: 409,
            code: "stale_token".to_owned(),
            message: "the continuation token was rotated".to_owned(),
        };
        assert_eq!(
            e.to_string(),
            "POST http://127.0.0.1:1/a/v1/session/ses_1 returned 409 (stale_token): the continuation token was rotated"
        );
        assert_eq!(e.status(), Some(409));
        assert_eq!(e.code(), Some("stale_token"));
    }
}
