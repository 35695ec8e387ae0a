//! agentkit auth: decides whether an HTTP request may reach an agent.
//!
//! The crate evaluates a [`Chain`] of [`Policy`]s against a plain, borrowed
//! view of a request ([`RequestParts`]: peer address, `Host`, headers, raw
//! body) and returns either the [`AuthContext`] of the first policy that
//! admits it or [`Denied`], which the caller maps to `401`.
//!
//! It is also the one home of HMAC signing ([`sign_body`] for webhook,
//! hook and delivery bodies; [`sign_bridge_call`] for the host bridge's
//! per-call credentials), next to the constant-time checks of the same
//! ([`verify_body`], [`verify_bridge_call`]).
//!
//! It also says who is an operator ([`Operators`]: the operator token's
//! holder, the loopback caller under `--dev`), verifies JSON Web Tokens
//! against an identity provider's keys ([`JwtPolicy`]) and takes policies
//! written in Rust ([`Verifier`], [`CustomPolicy`]). It signs the host's
//! agent-identity tokens ([`IdentityIssuer`]: Ed25519 keys, rotated, the
//! public ones as a JWKS) for the servers an agent calls.
//!
//! It is not an HTTP layer: no framework types cross its API, and it does
//! no IO (the JWKS is fetched through the caller's [`JwksFetcher`]). It does not read project files or the environment either: the
//! facade converts the manifest's parsed `auth` arrays into [`Policy`]s,
//! resolving `${VAR}` secrets first. Ownership checks (`403` for another
//! principal's session) belong to the runtime, which compares the
//! principal this crate returns.

mod chain;
mod context;
mod credential;
mod error;
mod identity;
mod jwt;
mod local;
mod oidc;
mod operator;
mod policy;
mod request;
mod role;
mod secret;
mod sign;
mod verifier;

pub use crate::{
    chain::{Chain, Surface},
    context::{AuthContext, PrincipalType},
    error::{Denied, Error, Refusal, Result},
    identity::{IdentityClaims, IdentityConfig, IdentityError, IdentityIssuer, MintedToken},
    jwt::{JwksFetcher, JwksFuture, JwtAlgorithm, JwtConfig, JwtPolicy},
    oidc::{
        CSRF_COOKIE, CSRF_HEADER, ID_TOKEN_COOKIE, LOGIN_COOKIE, LOGOUT_COOKIE, LoginStart,
        LogoutStart, Oidc, OidcConfig, OidcMetadata, PendingLogin, SESSION_COOKIE, SignedIn,
        cookie_value, form_encode,
    },
    operator::{OPERATOR_PRINCIPAL, Operators},
    policy::{BearerToken, Policy},
    request::{FORWARDING_HEADERS, RequestParts},
    role::{Role, RoleMap, RoleRule},
    secret::Secret,
    sign::{
        SLACK_MAX_AGE_SECS, sign_body, sign_bridge_call, sign_slack, verify_body,
        verify_bridge_call, verify_slack,
    },
    verifier::{CustomPolicy, Verdict, Verifier},
};
