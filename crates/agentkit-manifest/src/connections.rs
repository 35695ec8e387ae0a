//! `mcp-connections/<name>.toml`: streamable HTTP, stdio child, a peer
//! agent on the same host, or a remote A2A agent by its card.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::diagnostic::{Code, Diagnostic};
use crate::model::{Connection, Transport};
use crate::source::Ctx;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConnection {
    description: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    agent: Option<String>,
    /// The URL of a remote A2A agent's card.
    a2a: Option<String>,
    /// An HTTP server that wants OAuth (`agentkit mcp login`).
    #[serde(default)]
    oauth: bool,
    /// A client registered with the authorization server beforehand.
    oauth_client_id: Option<String>,
    oauth_client_secret: Option<String>,
    /// This client's metadata document (an HTTPS URL used as its client id).
    oauth_client_metadata_url: Option<String>,
    /// `"agent-identity"`: each request carries a token the host signs.
    auth: Option<String>,
    /// The `aud` of those tokens (default: the connection's URL).
    audience: Option<String>,
}

pub(crate) fn read_connection(ctx: &mut Ctx, path: &Path, name: &str) -> Option<Connection> {
    let src = ctx.read_text(path)?;
    let raw: RawConnection = ctx.parse_toml(&src)?;
    let set: Vec<&str> = [
        ("url", raw.url.is_some()),
        ("command", raw.command.is_some()),
        ("agent", raw.agent.is_some()),
        ("a2a", raw.a2a.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, on)| on.then_some(k))
    .collect();
    let fail = |ctx: &mut Ctx, code, key: &str, msg: String| {
        ctx.push(Diagnostic::error(code, src.rel.clone(), msg).at(src.key_pos(key)));
        None
    };
    if set.len() != 1 {
        let msg = if set.is_empty() {
            format!("connection `{name}` needs one of `url`, `command`, `agent` or `a2a`")
        } else {
            format!(
                "connection `{name}` sets {}; choose one transport",
                set.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            )
        };
        let key = set.get(1).copied().unwrap_or("url");
        ctx.push(
            Diagnostic::error(if set.is_empty() { Code::MissingField } else { Code::ConflictingFields }, src.rel.clone(), msg)
                .at(src.key_pos(key))
                .with_hint("`url` (+ `headers`) for streamable HTTP, `command` (+ `args`, `env`, `cwd`) for stdio, `agent = \"<slug>\"` for a peer agent, `a2a = \"<agent card URL>\"` (+ `headers`) for a remote A2A agent"),
        );
        return None;
    }
    let transport = if let Some(url) = raw.url {
        if !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
            return fail(
                ctx,
                Code::ConflictingFields,
                "args",
                "`args`, `env` and `cwd` are for `command` connections".into(),
            );
        }
        if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${")) {
            return fail(
                ctx,
                Code::InvalidValue,
                "url",
                format!("`url` must be an http(s) URL, not `{url}`"),
            );
        }
        if raw.oauth
            && raw
                .headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"))
        {
            return fail(
                ctx,
                Code::ConflictingFields,
                "oauth",
                "`oauth = true` and an `Authorization` header both authorize the connection; keep one".into(),
            );
        }
        Transport::Http {
            url,
            headers: raw.headers,
        }
    } else if let Some(card) = raw.a2a {
        if raw.oauth || !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
            return fail(
                ctx,
                Code::ConflictingFields,
                "a2a",
                "an `a2a` connection takes only `a2a`, `headers` and `description`".into(),
            );
        }
        if !(card.starts_with("http://") || card.starts_with("https://") || card.starts_with("${"))
        {
            return fail(
                ctx,
                Code::InvalidValue,
                "a2a",
                format!("`a2a` must be the http(s) URL of an agent card, not `{card}`"),
            );
        }
        Transport::A2a {
            card,
            headers: raw.headers,
        }
    } else if raw.oauth {
        return fail(
            ctx,
            Code::ConflictingFields,
            "oauth",
            "`oauth = true` is for `url` connections (streamable HTTP)".into(),
        );
    } else if let Some(command) = raw.command {
        if !raw.headers.is_empty() {
            return fail(
                ctx,
                Code::ConflictingFields,
                "headers",
                "`headers` are for `url` connections".into(),
            );
        }
        if command.trim().is_empty() {
            return fail(
                ctx,
                Code::InvalidValue,
                "command",
                "`command` must name a program".into(),
            );
        }
        Transport::Stdio {
            command,
            args: raw.args,
            env: raw.env,
            cwd: raw.cwd,
        }
    } else {
        let agent = raw.agent.unwrap_or_default();
        if !raw.headers.is_empty()
            || !raw.args.is_empty()
            || !raw.env.is_empty()
            || raw.cwd.is_some()
        {
            return fail(
                ctx,
                Code::ConflictingFields,
                "agent",
                "a peer connection takes only `agent` (and `description`)".into(),
            );
        }
        Transport::Peer { agent }
    };
    let client_keys = [
        ("oauth_client_id", raw.oauth_client_id.is_some()),
        ("oauth_client_secret", raw.oauth_client_secret.is_some()),
        (
            "oauth_client_metadata_url",
            raw.oauth_client_metadata_url.is_some(),
        ),
    ];
    if let Some((key, _)) = client_keys
        .iter()
        .find(|(_, set)| *set)
        .filter(|_| !raw.oauth)
    {
        return fail(
            ctx,
            Code::ConflictingFields,
            key,
            format!("`{key}` is for connections with `oauth = true`"),
        );
    }
    if raw.oauth_client_secret.is_some() && raw.oauth_client_id.is_none() {
        return fail(
            ctx,
            Code::MissingField,
            "oauth_client_secret",
            "`oauth_client_secret` needs the `oauth_client_id` it belongs to".into(),
        );
    }
    if let Some(url) = &raw.oauth_client_metadata_url
        && !(url.starts_with("https://") || url.starts_with("${"))
    {
        return fail(
            ctx,
            Code::InvalidValue,
            "oauth_client_metadata_url",
            format!(
                "`oauth_client_metadata_url` must be an https URL (the authorization server fetches it), not `{url}`"
            ),
        );
    }
    let agent_identity = match (raw.auth.as_deref(), &transport) {
        (None, _) => {
            if raw.audience.is_some() {
                return fail(
                    ctx,
                    Code::ConflictingFields,
                    "audience",
                    "`audience` is for connections with `auth = \"agent-identity\"`".into(),
                );
            }
            None
        }
        (Some("agent-identity"), Transport::Http { url, headers })
        | (Some("agent-identity"), Transport::A2a { card: url, headers }) => {
            if raw.oauth {
                return fail(
                    ctx,
                    Code::ConflictingFields,
                    "auth",
                    "`auth = \"agent-identity\"` and `oauth = true` both authorize the connection; keep one".into(),
                );
            }
            if headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"))
            {
                return fail(
                    ctx,
                    Code::ConflictingFields,
                    "auth",
                    "`auth = \"agent-identity\"` and an `Authorization` header both authorize the connection; keep one".into(),
                );
            }
            Some(raw.audience.clone().unwrap_or_else(|| url.clone()))
        }
        (Some("agent-identity"), _) => {
            return fail(
                ctx,
                Code::ConflictingFields,
                "auth",
                "`auth = \"agent-identity\"` is for `url` and `a2a` connections (a stdio child or a peer on this host needs no token)".into(),
            );
        }
        (Some(other), _) => {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("`auth` must be \"agent-identity\", not `{other}`"),
                )
                .at(src.key_pos("auth"))
                .with_hint("`auth = \"agent-identity\"` sends a short-lived token the host signs (see the auth reference); static credentials go in `headers`"),
            );
            return None;
        }
    };
    Some(Connection {
        name: name.to_owned(),
        path: src.rel.clone(),
        description: raw.description,
        transport,
        oauth: raw.oauth,
        agent_identity,
        oauth_client: crate::model::OAuthClientSettings {
            client_id: raw.oauth_client_id,
            client_secret: raw.oauth_client_secret,
            metadata_url: raw.oauth_client_metadata_url,
        },
    })
}
