//! The playground (`/<slug>/playground`, `/playground` in single mode), its
//! assets (`/playground/assets/*`, host-wide) and the docs (`/docs`): the
//! static files of `agentkit-playground`, served with their content types,
//! ETags, cache headers and a strict Content-Security-Policy.
//!
//! The pages are public, as static files are: every call the playground
//! makes goes to the agent's HTTP API and runs its auth chain there.

mod docs;

use std::hash::{DefaultHasher, Hasher as _};

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::agent::Mounted;
use super::{Mode, ServeHandle};

/// Scripts, styles, images and connections from this origin only; no
/// inline script, no framing, no plugins.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// How long a response may be reused.
#[derive(Debug, Clone, Copy)]
enum Cache {
    /// A content-hashed asset: its name changes with its bytes.
    Immutable,
    /// A page: revalidated every time (cheap with the ETag).
    Revalidate,
}

/// The playground's and the docs' routes, to merge into the host router.
pub(crate) fn router(
    agents: &[Mounted],
    mode: Mode,
    playground: bool,
    oidc: Option<agentkit_auth::Oidc>,
) -> Router {
    let mut app = Router::new()
        .route("/docs", get(|| async { Redirect::permanent(docs::ROOT) }))
        .route(
            "/docs/",
            get(|h: HeaderMap| async move { docs_page("", &h) }),
        )
        .route(
            "/docs/{*rest}",
            get(|Path(rest): Path<String>, h: HeaderMap| async move { docs_page(&rest, &h) }),
        )
        // The playground's stylesheet and script serve the docs too.
        .route("/playground/assets/{file}", get(asset))
        .route("/favicon.ico", get(favicon));
    if !playground {
        return app;
    }
    for agent in agents {
        let page = page_for(&agent.prefix, &agent.slug);
        let path = format!("{}/playground", agent.prefix);
        for route in [path.clone(), format!("{path}/")] {
            let page = page.clone();
            let oidc = oidc.clone();
            let here = path.clone();
            app = app.route(
                &route,
                get(move |peer: Peer, h: HeaderMap| async move {
                    if let Some(to) = sign_in_first(oidc.as_ref(), peer.0, &h, &here) {
                        return Redirect::to(&to).into_response();
                    }
                    respond(
                        &h,
                        "text/html; charset=utf-8",
                        page.into_bytes(),
                        Cache::Revalidate,
                    )
                }),
            );
        }
    }
    if mode == Mode::Multi {
        // The host's index links every agent's playground.
        app = app.route("/playground", get(|| async { Redirect::temporary("/") }));
    }
    app
}

/// The client's address, when known.
struct Peer(Option<std::net::IpAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Peer, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|c| c.0.ip()),
        ))
    }
}

/// With OIDC sign-in, a browser without a session goes to `/login` first
/// (and comes back here); the direct loopback caller does not (the
/// developer on their own machine, whom the default chain admits).
fn sign_in_first(
    oidc: Option<&agentkit_auth::Oidc>,
    peer: Option<std::net::IpAddr>,
    headers: &HeaderMap,
    here: &str,
) -> Option<String> {
    let oidc = oidc?;
    let cookies = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join("; ");
    if oidc.signed_in(&cookies).is_some() {
        return None;
    }
    let forwarded = agentkit_auth::FORWARDING_HEADERS
        .iter()
        .any(|h| headers.contains_key(*h));
    if peer.is_some_and(|p| p.is_loopback()) && !forwarded {
        return None;
    }
    Some(format!("/login?next={}", agentkit_auth::form_encode(here)))
}

/// The playground page of one agent: the bundle's `index.html` with the
/// agent's path prefix and slug filled in (read by the app from `<meta>`).
fn page_for(prefix: &str, slug: &str) -> String {
    agentkit_playground::index_html()
        .replace("%AGENTKIT_BASE%", &escape_attr(prefix))
        .replace("%AGENTKIT_SLUG%", &escape_attr(slug))
}

fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let path = format!("assets/{file}");
    match agentkit_playground::playground_file(&path) {
        Some(bytes) => respond(
            &headers,
            agentkit_playground::content_type(&path),
            bytes.to_vec(),
            Cache::Immutable,
        ),
        None => not_found_text(),
    }
}

async fn favicon(headers: HeaderMap) -> Response {
    match agentkit_playground::playground_file("favicon.svg") {
        Some(bytes) => respond(&headers, "image/svg+xml", bytes.to_vec(), Cache::Revalidate),
        None => not_found_text(),
    }
}

fn docs_page(rest: &str, headers: &HeaderMap) -> Response {
    match docs::lookup(rest) {
        docs::Lookup::Page(path) => {
            let page = docs::render(path);
            respond(
                headers,
                "text/html; charset=utf-8",
                docs::html(path, &page).into_bytes(),
                Cache::Revalidate,
            )
        }
        docs::Lookup::Raw(path, bytes) => respond(
            headers,
            agentkit_playground::content_type(path),
            bytes.to_vec(),
            Cache::Revalidate,
        ),
        docs::Lookup::Redirect(to) => Redirect::permanent(&to).into_response(),
        docs::Lookup::NotFound => {
            let mut resp = respond(
                headers,
                "text/html; charset=utf-8",
                docs::not_found_html().into_bytes(),
                Cache::Revalidate,
            );
            *resp.status_mut() = StatusCode::NOT_FOUND;
            resp
        }
    }
}

fn not_found_text() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

/// A static answer with its headers; `304` when the client's
/// `If-None-Match` names the same bytes.
fn respond(
    request: &HeaderMap,
    content_type: &'static str,
    body: Vec<u8>,
    cache: Cache,
) -> Response {
    let mut hasher = DefaultHasher::new();
    hasher.write(&body);
    let etag = format!("\"{:016x}\"", hasher.finish());
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        body.into_response()
    };
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(match cache {
            Cache::Immutable => "public, max-age=31536000, immutable",
            Cache::Revalidate => "no-cache",
        }),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

impl ServeHandle {
    /// The playground of agent `slug` (`…/<slug>/playground`, or
    /// `…/playground` in single mode); `None` when the playground is off
    /// or no such agent is served.
    pub fn playground_url(&self, slug: &str) -> Option<String> {
        (self.playground && self.agents.iter().any(|a| a.slug == slug))
            .then(|| format!("{}/playground", self.agent_url(slug)))
    }

    /// The URL of the served docs (`…/docs/`).
    pub fn docs_url(&self) -> String {
        format!("{}{}", self.url(), docs::ROOT)
    }
}
