//! The host configuration file (`agentkit serve --config FILE`) applied
//! to [`ServeOptions`]: the file is read and checked by
//! `agentkit_manifest::read_host_config` (diagnostics with file, line and
//! hint); here its secrets by reference are resolved (operator token,
//! bearer token, database URL; the OIDC client secret stays a reference,
//! resolved when sign-in starts) and its values set on the options. The
//! binary applies its flags afterwards, so a flag wins over the file.

use std::path::Path;

use agentkit_manifest::{Code, Diagnostic, Diagnostics, HostConfig, SecretRef};

use super::oidc::OidcOptions;
use super::options::ServeOptions;
use crate::error::{Error, Result};

/// Reads and checks the host configuration file at `path`; a file with
/// errors is [`Error::HostConfig`] with every diagnostic.
pub fn read_host_config(path: &Path) -> Result<HostConfig> {
    let (config, diagnostics) = agentkit_manifest::read_host_config(path);
    match config {
        Some(config) => Ok(config),
        None => Err(Error::HostConfig {
            path: path.display().to_string(),
            diagnostics,
        }),
    }
}

/// Sets what `config` names on `options`, resolving its secrets by
/// reference with `options.env` and `options.secret_command` (set those
/// first). A reference that cannot be resolved is a
/// `secret-unavailable` diagnostic at its line; no message carries a
/// value.
pub async fn apply_host_config(config: &HostConfig, options: &mut ServeOptions) -> Result<()> {
    let mut diagnostics = Diagnostics::default();
    let server = &config.server;
    if let Some(addr) = server.listen {
        options.host = addr.ip();
        options.port = addr.port();
    }
    if let Some(url) = &server.public_url {
        options.public_url = Some(url.clone());
    }
    if let Some(root) = &server.state_root {
        options.state_root = Some(root.clone());
    }
    if let Some(public) = server.metrics_public {
        options.telemetry.metrics_public = public;
    }
    let auth = &config.auth;
    for (reference, target) in [
        (&server.database_url, &mut options.database_url),
        (&auth.operator_token, &mut options.operator_token),
        (&auth.bearer_token, &mut options.bearer_token),
    ] {
        let Some(reference) = reference else { continue };
        match crate::secrets::resolve_reference(
            &reference.reference,
            &options.env,
            options.secret_command.as_ref(),
        )
        .await
        {
            Ok(value) => *target = Some(value),
            Err(why) => diagnostics.push(unavailable(&config.path, reference, &why)),
        }
    }
    if let Some(o) = &auth.oidc {
        let mut oidc = OidcOptions::new(o.issuer.clone(), o.client_id.clone());
        oidc.client_secret = o.client_secret.as_ref().map(|r| r.reference.clone());
        if let Some(scopes) = &o.scopes {
            oidc.scopes = scopes.clone();
        }
        oidc.audiences = o.audiences.clone();
        if let Some(ttl) = o.session_ttl {
            oidc.session_ttl = ttl;
        }
        if let Some(skew) = o.clock_skew {
            oidc.clock_skew = skew;
        }
        if let Some(claim) = &o.principal_claim {
            oidc.principal_claim = claim.clone();
        }
        options.oidc = Some(oidc);
    }
    if diagnostics.is_empty() {
        Ok(())
    } else {
        Err(Error::HostConfig {
            path: config.path.clone(),
            diagnostics,
        })
    }
}

fn unavailable(path: &str, reference: &SecretRef, why: &str) -> Diagnostic {
    let hint = if reference.reference.starts_with("${file:") {
        "mount the file where the host runs, readable by its user"
    } else if reference.reference.starts_with("${secret:") {
        "start the host with `--secret-command PROGRAM`, which prints the secret named by its last argument"
    } else {
        "set the variable in the host's environment"
    };
    Diagnostic::error(
        Code::SecretUnavailable,
        path,
        format!("`{}`: {why}", reference.field),
    )
    .at(Some(reference.position))
    .with_hint(hint)
}
