//! The playground and `/docs` over HTTP: the pages, their headers (content
//! types, ETags, cache, CSP), every docs page rendered with every relative
//! link answering, and paths that try to leave the docs.

use std::collections::BTreeSet;

use agentkit::ServeOptions;
use agentkit_test_support::http::{Request, Response};

use super::http::{Server, server};

fn get(s: &Server, path: &str) -> Response {
    Request::get(path).send(s.addr()).unwrap()
}

/// The `href`s of a page, in order.
fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|h| h.replace("&amp;", "&"))
        .collect()
}

#[test]
fn the_playground_page_and_assets_carry_their_headers() {
    let s = server(&[], ServeOptions::default());
    let page = get(&s, "/bot/playground");
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert!(
        page.body
            .contains(r#"<meta name="agentkit-base" content="/bot" />"#)
    );
    // A revalidation with the ETag is answered 304.
    let etag = page.header("etag").unwrap().to_owned();
    let again = Request::get("/bot/playground")
        .header("if-none-match", &etag)
        .send(s.addr())
        .unwrap();
    assert_eq!(again.status, 304);

    let assets: Vec<String> = hrefs(&page.body)
        .into_iter()
        .chain(
            page.body
                .split("src=\"")
                .skip(1)
                .filter_map(|r| r.split('"').next().map(str::to_owned)),
        )
        .filter(|h| h.starts_with("/playground/assets/"))
        .collect();
    assert_eq!(assets.len(), 2, "{assets:?}");
    for asset in &assets {
        let r = get(&s, asset);
        assert_eq!(r.status, 200, "{asset}");
        assert_eq!(
            r.header("cache-control"),
            Some("public, max-age=31536000, immutable")
        );
        let ct = r.header("content-type").unwrap();
        assert!(
            ct.starts_with("text/javascript") || ct.starts_with("text/css"),
            "{asset}: {ct}"
        );
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    }
    assert_eq!(get(&s, "/playground/assets/nope.js").status, 404);
    assert_eq!(
        get(&s, "/favicon.ico").header("content-type"),
        Some("image/svg+xml")
    );
    // The host index links the playground; `/playground` leads there.
    assert!(get(&s, "/").body.contains("href=\"/bot/playground\""));
    assert_eq!(get(&s, "/playground").header("location"), Some("/"));
    // A new session's answer says where to open it.
    let created = Request::post("/bot/v1/session")
        .json(&serde_json::json!({"message": "hi"}))
        .send(s.addr())
        .unwrap()
        .json();
    let id = created["sessionId"].as_str().unwrap();
    assert_eq!(created["playgroundUrl"], format!("/bot/playground#{id}"));
    // The page is public; the API it calls is not (the default chain
    // admits loopback, so a forwarded request stands for a remote one).
    let remote = Request::get("/bot/v1/sessions")
        .header("x-forwarded-for", "203.0.113.9")
        .send(s.addr())
        .unwrap();
    assert_eq!(remote.status, 401);
}

#[test]
fn single_mode_serves_the_playground_at_the_root() {
    let s = server(
        &[],
        ServeOptions {
            mode: agentkit::Mode::Single,
            ..ServeOptions::default()
        },
    );
    let page = get(&s, "/playground");
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(r#"<meta name="agentkit-base" content="" />"#)
    );
    assert_eq!(
        s.handle.as_ref().unwrap().playground_url("bot"),
        Some(format!("http://{}/playground", s.addr()))
    );
}

#[test]
fn every_docs_page_renders_and_every_relative_link_answers() {
    let s = server(&[], ServeOptions::default());
    assert_eq!(get(&s, "/docs").header("location"), Some("/docs/"));
    let index = get(&s, "/docs/");
    assert_eq!(index.status, 200);
    assert!(index.header("content-security-policy").is_some());
    // Every page is in the navigation of the index.
    let pages: BTreeSet<String> = hrefs(&index.body)
        .into_iter()
        .filter(|h| h.starts_with("/docs/"))
        .collect();
    assert!(pages.len() > 20, "{pages:?}");
    assert!(pages.contains("/docs/reference/http-api"));
    assert!(pages.contains("/docs/guides/playground"));
    let mut checked = BTreeSet::new();
    let mut broken = Vec::new();
    for page in &pages {
        let r = get(&s, page);
        assert_eq!(r.status, 200, "{page}");
        assert!(r.body.contains("<h1"), "{page} has no title");
        for href in hrefs(&r.body) {
            let Some(path) = href
                .strip_prefix("/docs/")
                .map(|_| href.split('#').next().unwrap_or(""))
            else {
                continue;
            };
            if !checked.insert(path.to_owned()) {
                continue;
            }
            let status = get(&s, path).status;
            if status != 200 {
                broken.push(format!("{page} → {href}: {status}"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    // The old `.md` URLs still lead to the page.
    assert_eq!(
        get(&s, "/docs/reference/tools.md").header("location"),
        Some("/docs/reference/tools")
    );
    // Raw benchmark runs live beside the bench, not in the served docs.
    assert_eq!(
        get(&s, "/docs/benchmarks/session-core-after.json").status,
        404
    );
}

#[test]
fn docs_paths_never_leave_the_docs() {
    let s = server(&[], ServeOptions::default());
    for path in [
        "/docs/../Cargo.toml",
        "/docs/%2e%2e/Cargo.toml",
        "/docs/reference/%2e%2e/%2e%2e/Cargo.toml",
        "/docs/..%2fCargo.toml",
        "/docs/reference/..%5c..%5cCargo.toml",
        "/docs//etc/passwd",
        "/docs/nope",
    ] {
        let r = get(&s, path);
        assert!(
            r.status == 404
                || (r.status == 308
                    && r.header("location")
                        .is_some_and(|l| l.starts_with("/docs/"))),
            "{path}: {} {:?}",
            r.status,
            r.header("location")
        );
        assert!(!r.body.contains("[workspace]"), "{path}");
    }
}

#[test]
fn no_playground_keeps_the_docs() {
    let s = server(
        &[],
        ServeOptions {
            playground: false,
            ..ServeOptions::default()
        },
    );
    assert_eq!(get(&s, "/bot/playground").status, 404);
    assert_eq!(get(&s, "/docs/").status, 200);
    assert!(get(&s, "/").body.contains("href=\"/bot/v1/info\""));
    let created = Request::post("/bot/v1/session")
        .json(&serde_json::json!({"message": "hi"}))
        .send(s.addr())
        .unwrap()
        .json();
    assert!(created.get("playgroundUrl").is_none(), "{created}");
    assert_eq!(s.handle.as_ref().unwrap().playground_url("bot"), None);
}
