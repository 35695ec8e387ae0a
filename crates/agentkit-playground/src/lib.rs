//! agentkit-playground: the playground single-page app and the user docs, as
//! static files embedded in the binary. It is only files: serving them
//! (routes, headers, rendering the docs' Markdown) is the facade's job.
//!
//! Two committed folders are embedded by `build.rs`:
//!
//! - `dist/`, the playground built from the TypeScript sources in `web/`
//!   (`npm ci && npm run build` there). `dist/source-hash.txt` records the
//!   hash of the sources it was built from; `cargo xtask tidy` fails when
//!   it is stale.
//! - `docs/`, a copy of the repository's `docs/` (`cargo xtask sync-docs`);
//!   tidy fails when it differs from the original.
//!
//! A package installed from crates.io cannot read outside its own folder,
//! hence the copies. Building this crate never runs Node.

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// Where the playground's assets are served from, host-wide (`playground`
/// is a reserved slug, so the path never collides with an agent).
pub const ASSETS_PATH: &str = "/playground/assets/";

/// A file of the built playground, by its path inside `dist/`
/// (`index.html`, `favicon.svg`, `assets/app-<hash>.js`).
pub fn playground_file(path: &str) -> Option<&'static [u8]> {
    find(embedded::DIST, path)
}

/// The paths of the built playground's files.
pub fn playground_files() -> impl Iterator<Item = &'static str> {
    embedded::DIST.iter().map(|(p, _)| *p)
}

/// The playground's page, with the placeholders `%AGENTKIT_BASE%` (the
/// agent's path prefix) and `%AGENTKIT_SLUG%` for the server to fill.
pub fn index_html() -> &'static str {
    playground_file("index.html")
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("")
}

/// The hash of the `web/` sources the bundle was built from.
pub fn source_hash() -> &'static str {
    playground_file("source-hash.txt")
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::trim)
        .unwrap_or("")
}

/// The URL path of the hashed asset whose name starts with `stem-` and
/// ends with `ext` (`asset_url("style", ".css")`).
pub fn asset_url(stem: &str, ext: &str) -> Option<String> {
    embedded::DIST.iter().find_map(|(p, _)| {
        let name = p.strip_prefix("assets/")?;
        let rest = name.strip_prefix(stem)?.strip_prefix('-')?;
        (rest.ends_with(ext) && !rest.contains('/')).then(|| format!("{ASSETS_PATH}{name}"))
    })
}

/// A file of the docs copy, by its path inside `docs/`
/// (`reference/http-api.md`).
pub fn doc_file(path: &str) -> Option<&'static [u8]> {
    find(embedded::DOCS, path)
}

/// Every file of the docs copy, in path order.
pub fn doc_files() -> impl Iterator<Item = (&'static str, &'static [u8])> {
    embedded::DOCS.iter().copied()
}

/// The `Content-Type` of a static file, by its extension.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("md") => "text/markdown; charset=utf-8",
        Some("txt") => "text/plain; charset=utf-8",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

fn find(table: &'static [(&'static str, &'static [u8])], path: &str) -> Option<&'static [u8]> {
    table
        .binary_search_by(|(p, _)| (*p).cmp(path))
        .ok()
        .map(|i| table[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_is_embedded() {
        let html = index_html();
        assert!(html.contains("%AGENTKIT_BASE%"), "{html}");
        let app = asset_url("app", ".js");
        let style = asset_url("style", ".css");
        for url in [&app, &style, &asset_url("docs", ".js")] {
            let url = url.as_deref().unwrap_or("missing");
            let path = url.trim_start_matches("/playground/");
            assert!(playground_file(path).is_some(), "{url}");
        }
        assert!(html.contains(app.as_deref().unwrap_or("?")), "{html}");
        assert!(html.contains(style.as_deref().unwrap_or("?")), "{html}");
        assert_eq!(source_hash().len(), 64);
    }

    #[test]
    fn tables_are_sorted_for_binary_search() {
        for table in [embedded::DIST, embedded::DOCS] {
            assert!(table.windows(2).all(|w| w[0].0 < w[1].0));
        }
        assert!(doc_file("README.md").is_some());
        assert!(doc_file("reference/http-api.md").is_some());
        assert!(doc_file("../Cargo.toml").is_none());
    }

    #[test]
    fn content_types() {
        assert_eq!(
            content_type("assets/app-X.js"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type("favicon.svg"), "image/svg+xml");
        assert_eq!(content_type("x"), "application/octet-stream");
    }
}
