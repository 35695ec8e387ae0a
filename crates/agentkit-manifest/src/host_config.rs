//! The host configuration file (`agentkit serve --config FILE`): what one
//! host needs besides its agents (where it listens, its public URL, the
//! shared database, the operator token, `[auth.oidc]` sign-in), read and
//! checked like a definition file: bad input is diagnostics with the
//! file, line and a hint, never a panic. Secrets are references only
//! (`${VAR}`, `${file:/path}`, `${secret:name}`), left for the host to
//! resolve; this crate never reads the environment.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::checks;
use crate::diagnostic::{Code, Diagnostic, Diagnostics, Position};
use crate::source::{Ctx, SourceText};

/// A checked host configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// The file as it was named (for messages).
    pub path: String,
    pub server: HostServer,
    pub auth: HostAuth,
}

/// `[server]`: where and how the host listens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostServer {
    /// `listen = "0.0.0.0:3000"`.
    pub listen: Option<SocketAddr>,
    /// `public_url`: the URL people and peers reach the host at.
    pub public_url: Option<String>,
    /// `state_root`, relative to the file's folder when not absolute.
    pub state_root: Option<PathBuf>,
    /// `database_url`, by reference (it usually holds a password).
    pub database_url: Option<SecretRef>,
    /// `metrics_public`: serve `/metrics` without authentication.
    pub metrics_public: Option<bool>,
}

/// `[auth]`: who is who on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostAuth {
    /// `operator_token`, by reference.
    pub operator_token: Option<SecretRef>,
    /// `bearer_token`, by reference.
    pub bearer_token: Option<SecretRef>,
    /// `[auth.oidc]`.
    pub oidc: Option<HostOidc>,
}

/// `[auth.oidc]`: sign-in with the company's identity provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOidc {
    pub issuer: String,
    pub client_id: String,
    /// By reference; `None`: a public client (PKCE only).
    pub client_secret: Option<SecretRef>,
    /// Scopes besides `openid`; `None`: the host's default.
    pub scopes: Option<Vec<String>>,
    pub audiences: Vec<String>,
    pub session_ttl: Option<Duration>,
    pub clock_skew: Option<Duration>,
    pub principal_claim: Option<String>,
}

/// A secret named by reference in the file, with where it was written
/// (so a reference the host cannot resolve is reported at its line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// `${VAR}`, `${file:/path}` or `${secret:name}`, as written.
    pub reference: String,
    /// The field's dotted name (`auth.oidc.client_secret`).
    pub field: &'static str,
    pub position: Position,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    auth: RawAuth,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<Spanned<String>>,
    public_url: Option<Spanned<String>>,
    state_root: Option<PathBuf>,
    database_url: Option<Spanned<String>>,
    metrics_public: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    operator_token: Option<Spanned<String>>,
    bearer_token: Option<Spanned<String>>,
    oidc: Option<RawOidc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOidc {
    issuer: Spanned<String>,
    client_id: String,
    client_secret: Option<Spanned<String>>,
    scopes: Option<Vec<String>>,
    #[serde(default)]
    audiences: Vec<String>,
    session_ttl: Option<Spanned<String>>,
    clock_skew: Option<Spanned<String>>,
    principal_claim: Option<String>,
}

/// Reads and checks the host configuration file at `path`: the
/// configuration when it has no error, and every diagnostic found either
/// way (paths in them are `path` as given).
pub fn read_host_config(path: &Path) -> (Option<HostConfig>, Diagnostics) {
    let mut ctx = Ctx::new(Path::new(""));
    let parsed = ctx.read_text(path).and_then(|src| {
        let raw = ctx.parse_toml::<RawFile>(&src)?;
        let base = path.parent().unwrap_or(Path::new(""));
        Some(check(&mut ctx, &src, raw, base))
    });
    ctx.take_env_refs();
    let mut diagnostics = ctx.diagnostics;
    diagnostics.sort();
    let config = parsed.filter(|_| !diagnostics.has_errors());
    (config, diagnostics)
}

fn check(ctx: &mut Ctx, src: &SourceText, raw: RawFile, base: &Path) -> HostConfig {
    let mut c = Checker { ctx, src };
    let listen = raw.server.listen.and_then(|l| {
        let parsed = l.get_ref().trim().parse::<SocketAddr>();
        match parsed {
            Ok(addr) => Some(addr),
            Err(_) => {
                c.invalid(
                    &l,
                    format!(
                        "`server.listen`: `{}` is not an address and port",
                        l.get_ref()
                    ),
                    "write e.g. `listen = \"0.0.0.0:3000\"` or `\"[::]:3000\"`",
                );
                None
            }
        }
    });
    let server = HostServer {
        listen,
        public_url: raw
            .server
            .public_url
            .and_then(|u| c.http_url(u, "server.public_url")),
        state_root: raw.server.state_root.map(|p| base.join(p)),
        database_url: raw
            .server
            .database_url
            .and_then(|r| c.reference(r, "server.database_url", "database-url")),
        metrics_public: raw.server.metrics_public,
    };
    let oidc = raw.auth.oidc.map(|o| HostOidc {
        issuer: c.http_url(o.issuer, "auth.oidc.issuer").unwrap_or_default(),
        client_id: o.client_id,
        client_secret: o
            .client_secret
            .and_then(|r| c.reference(r, "auth.oidc.client_secret", "oidc-client-secret")),
        scopes: o.scopes,
        audiences: o.audiences,
        session_ttl: o
            .session_ttl
            .and_then(|d| c.duration(d, "auth.oidc.session_ttl")),
        clock_skew: o
            .clock_skew
            .and_then(|d| c.duration(d, "auth.oidc.clock_skew")),
        principal_claim: o.principal_claim,
    });
    let auth = HostAuth {
        operator_token: raw
            .auth
            .operator_token
            .and_then(|r| c.reference(r, "auth.operator_token", "operator-token")),
        bearer_token: raw
            .auth
            .bearer_token
            .and_then(|r| c.reference(r, "auth.bearer_token", "bearer-token")),
        oidc,
    };
    HostConfig {
        path: src.rel.clone(),
        server,
        auth,
    }
}

struct Checker<'a> {
    ctx: &'a mut Ctx,
    src: &'a SourceText,
}

impl Checker<'_> {
    fn at<T>(&self, value: &Spanned<T>) -> Position {
        self.src.position(value.span().start)
    }

    fn invalid<T>(&mut self, value: &Spanned<T>, message: String, hint: &str) {
        let d = Diagnostic::error(Code::InvalidValue, self.src.rel.clone(), message)
            .at(Some(self.at(value)))
            .with_hint(hint);
        self.ctx.push(d);
    }

    fn http_url(&mut self, url: Spanned<String>, field: &str) -> Option<String> {
        let s = url.get_ref().trim();
        let ok = ["http://", "https://"]
            .iter()
            .any(|p| s.strip_prefix(p).is_some_and(|rest| !rest.is_empty()));
        if ok {
            Some(s.to_owned())
        } else {
            self.invalid(
                &url,
                format!("`{field}`: `{s}` is not an http(s) URL"),
                "write the whole URL, e.g. `https://login.example.com/realms/acme`",
            );
            None
        }
    }

    /// A secret's reference: exactly one `${…}`, never the secret itself.
    fn reference(
        &mut self,
        value: Spanned<String>,
        field: &'static str,
        example: &str,
    ) -> Option<SecretRef> {
        let s = value.get_ref().trim();
        let inner = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'));
        let well_formed = inner.is_some_and(|i| {
            let name = i
                .strip_prefix("file:")
                .or_else(|| i.strip_prefix("secret:"))
                .unwrap_or(i);
            !name.trim().is_empty() && !i.contains(['$', '{', '}'])
        });
        if !well_formed {
            // Never echo the value: it may be the secret itself.
            self.invalid(
                &value,
                format!("`{field}` must be a reference to the secret, not the secret itself"),
                &format!(
                    "write `\"${{file:/run/secrets/{example}}}\"`, `\"${{VARIABLE}}\"` or `\"${{secret:{example}}}\"`: a value in a file is read by whoever reads the file"
                ),
            );
            return None;
        }
        Some(SecretRef {
            reference: s.to_owned(),
            field,
            position: self.at(&value),
        })
    }

    fn duration(&mut self, value: Spanned<String>, field: &str) -> Option<Duration> {
        match checks::parse_duration(value.get_ref()) {
            Ok(d) => Some(d),
            Err(message) => {
                let d = Diagnostic::error(
                    Code::InvalidDuration,
                    self.src.rel.clone(),
                    format!("`{field}`: {message}"),
                )
                .at(Some(self.at(&value)));
                self.ctx.push(d);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn check(text: &str) -> (Option<HostConfig>, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.toml");
        std::fs::write(&path, text).unwrap();
        let (config, diagnostics) = read_host_config(&path);
        let shown = diagnostics
            .iter()
            .map(|d| {
                d.to_string()
                    .replace(&path.display().to_string(), "host.toml")
            })
            .collect::<Vec<_>>()
            .join("\n");
        (config, shown)
    }

    #[test]
    fn a_full_file_reads_into_the_config() {
        let (config, shown) = check(
            r#"
[server]
listen = "0.0.0.0:8080"
public_url = "https://agents.example.com"
state_root = "state"
database_url = "${file:/run/secrets/database-url}"
metrics_public = false

[auth]
operator_token = "${AGENTKIT_OPERATOR_TOKEN}"

[auth.oidc]
issuer = "https://login.example.com/realms/acme"
client_id = "agentkit"
client_secret = "${secret:oidc}"
scopes = ["profile", "email", "groups"]
audiences = ["agentkit-api"]
session_ttl = "2h"
"#,
        );
        assert_eq!(shown, "");
        let config = config.unwrap();
        assert_eq!(config.server.listen.unwrap().port(), 8080);
        assert!(config.server.state_root.unwrap().ends_with("state"));
        let oidc = config.auth.oidc.unwrap();
        assert_eq!(oidc.client_secret.unwrap().reference, "${secret:oidc}");
        assert_eq!(oidc.session_ttl, Some(Duration::from_secs(7200)));
        let db = config.server.database_url.unwrap();
        assert_eq!((db.field, db.position.line), ("server.database_url", 6));
    }

    #[test]
    fn bad_files_say_where_and_what_to_do() {
        let (config, shown) = check(
            r#"[server]
listen = "everywhere"
metric_public = true

[auth]
operator_token = "hunter2"

[auth.oidc]
issuer = "login.example.com"
client_id = "agentkit"
session_ttl = "eight hours"
"#,
        );
        assert!(config.is_none());
        expect_test::expect![[r#"
            host.toml:3:1: error[unknown-field]: unknown field `metric_public` (hint: did you mean `metrics_public`?)"#]]
        .assert_eq(&shown);
        let (_, shown) = check(
            r#"[server]
listen = "everywhere"

[auth]
operator_token = "hunter2"

[auth.oidc]
issuer = "login.example.com"
client_id = "agentkit"
session_ttl = "eight hours"
"#,
        );
        assert!(!shown.contains("hunter2"));
        expect_test::expect![[r#"
            host.toml:2:10: error[invalid-value]: `server.listen`: `everywhere` is not an address and port (hint: write e.g. `listen = "0.0.0.0:3000"` or `"[::]:3000"`)
            host.toml:5:18: error[invalid-value]: `auth.operator_token` must be a reference to the secret, not the secret itself (hint: write `"${file:/run/secrets/operator-token}"`, `"${VARIABLE}"` or `"${secret:operator-token}"`: a value in a file is read by whoever reads the file)
            host.toml:8:10: error[invalid-value]: `auth.oidc.issuer`: `login.example.com` is not an http(s) URL (hint: write the whole URL, e.g. `https://login.example.com/realms/acme`)
            host.toml:10:15: error[invalid-duration]: `auth.oidc.session_ttl`: `eight hours` is not a duration (expected number at 0); write e.g. `30s`, `10m` or `2h`"#]]
        .assert_eq(&shown);
    }
}
