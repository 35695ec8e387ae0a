//! `/docs`: the user docs (the copy embedded by `agentkit-playground`)
//! rendered from Markdown with pulldown-cmark, with a navigation of every
//! page, a table of contents, heading anchors and relative links rewritten
//! to their served URLs. Lookups only ever read the embedded table, so no
//! request path can reach a file outside the docs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Where the docs are served.
pub(crate) const ROOT: &str = "/docs/";

/// A page, rendered.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) title: String,
    /// The article's HTML.
    pub(crate) body: String,
    /// `(level, id, text)` of each `##` and `###` heading.
    pub(crate) toc: Vec<(u8, String, String)>,
    /// Every heading id of the page.
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the link check"))]
    pub(crate) anchors: Vec<String>,
    /// Every relative link, resolved: `(docs path, fragment)`; a path
    /// outside the docs is `None` (it links to the repository).
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the link check"))]
    pub(crate) links: Vec<(Option<String>, Option<String>)>,
}

/// What a request path under `/docs/` names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A Markdown page, by its path in the docs (`reference/tools.md`).
    Page(&'static str),
    /// Another file of the docs (a benchmark's JSON), served as is.
    Raw(&'static str, &'static [u8]),
    /// The canonical URL of the same page.
    Redirect(String),
    NotFound,
}

/// The served URL of a docs file: `README.md` is its folder's index
/// (`/docs/`, `/docs/guides/`), a page drops `.md`, other files keep
/// their name.
pub(crate) fn url_of(path: &str) -> String {
    if path == "README.md" {
        return ROOT.to_owned();
    }
    if let Some(dir) = path.strip_suffix("/README.md") {
        return format!("{ROOT}{dir}/");
    }
    match path.strip_suffix(".md") {
        Some(page) => format!("{ROOT}{page}"),
        None => format!("{ROOT}{path}"),
    }
}

/// Resolves the part of a request path after `/docs/`.
pub(crate) fn lookup(rest: &str) -> Lookup {
    // Only plain segments: no `.`/`..`, no empty segment but a trailing
    // one, no backslash or NUL.
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    for (i, s) in segments.iter().enumerate() {
        if (s.is_empty() && i != last) || *s == "." || *s == ".." || s.contains(['\\', '\0']) {
            return Lookup::NotFound;
        }
    }
    if rest.is_empty() || rest.ends_with('/') {
        let index = format!("{rest}README.md");
        return match page_path(&index) {
            Some(p) => Lookup::Page(p),
            None => Lookup::NotFound,
        };
    }
    if rest.ends_with(".md") {
        return match page_path(rest) {
            Some(p) => Lookup::Redirect(url_of(p)),
            None => Lookup::NotFound,
        };
    }
    if let Some(p) = page_path(&format!("{rest}.md")) {
        return Lookup::Page(p);
    }
    if let Some((p, bytes)) = agentkit_playground::doc_files().find(|(p, _)| *p == rest) {
        return Lookup::Raw(p, bytes);
    }
    if page_path(&format!("{rest}/README.md")).is_some() {
        return Lookup::Redirect(format!("{ROOT}{rest}/"));
    }
    Lookup::NotFound
}

fn page_path(path: &str) -> Option<&'static str> {
    agentkit_playground::doc_files()
        .find(|(p, _)| *p == path)
        .map(|(p, _)| p)
}

/// Every page's path, in path order.
pub(crate) fn pages() -> impl Iterator<Item = &'static str> {
    agentkit_playground::doc_files()
        .map(|(p, _)| p)
        .filter(|p| p.ends_with(".md"))
}

/// Each page's title (its first heading), computed once.
fn titles() -> &'static BTreeMap<&'static str, String> {
    static TITLES: OnceLock<BTreeMap<&'static str, String>> = OnceLock::new();
    TITLES.get_or_init(|| {
        pages()
            .map(|p| {
                let source = source(p);
                let title = source
                    .lines()
                    .find_map(|l| l.strip_prefix("# "))
                    .map(|t| t.trim().replace('`', ""))
                    .unwrap_or_else(|| p.to_owned());
                (p, title)
            })
            .collect()
    })
}

fn source(path: &str) -> &'static str {
    agentkit_playground::doc_file(path)
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("")
}

/// GitHub's heading anchors: lowercase, spaces to `-`, punctuation other
/// than `-` and `_` dropped (the docs' own links are written that way).
pub(crate) fn slugify(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Joins a relative link to the folder of `page` and normalises it;
/// `None` when it climbs out of the docs.
fn resolve(page: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = page.split('/').collect();
    parts.pop();
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

fn is_relative(url: &str) -> bool {
    !(url.starts_with('#')
        || url.starts_with('/')
        || url.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.contains('/')
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }))
}

/// Renders the page at `path` (in the docs copy).
pub(crate) fn render(path: &str) -> Page {
    let text = source(path);
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TASKLISTS);
    let mut events: Vec<Event<'_>> = Vec::new();
    let mut toc = Vec::new();
    let mut anchors: Vec<String> = Vec::new();
    let mut links = Vec::new();
    let mut heading: Option<(HeadingLevel, Vec<Event<'_>>)> = None;
    let repository = env!("CARGO_PKG_REPOSITORY");
    for event in Parser::new_ext(text, options) {
        let event = match event {
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) if is_relative(&dest_url) => {
                let (target, fragment) = match dest_url.split_once('#') {
                    Some((t, f)) => (t, Some(f.to_owned())),
                    None => (&*dest_url, None),
                };
                let resolved = if target.is_empty() {
                    Some(path.to_owned())
                } else {
                    resolve(path, target)
                };
                let href = match &resolved {
                    Some(doc) => url_of(doc),
                    // Outside the docs (a crate, a fixture): the repository.
                    None => {
                        let repo_path =
                            resolve(&format!("docs/{path}"), target).unwrap_or_default();
                        format!("{repository}/blob/main/{repo_path}")
                    }
                };
                let href = match &fragment {
                    Some(f) => format!("{href}#{f}"),
                    None => href,
                };
                links.push((resolved, fragment));
                Event::Start(Tag::Link {
                    link_type,
                    dest_url: CowStr::from(href),
                    title,
                    id,
                })
            }
            other => other,
        };
        match (&mut heading, event) {
            (None, Event::Start(Tag::Heading { level, .. })) => heading = Some((level, Vec::new())),
            (Some((level, inner)), Event::End(TagEnd::Heading(_))) => {
                let level = *level;
                let mut plain = String::new();
                for e in inner.iter() {
                    if let Event::Text(t) | Event::Code(t) = e {
                        plain.push_str(t);
                    }
                }
                let base = slugify(&plain);
                let mut id = base.clone();
                let mut n = 1;
                while anchors.contains(&id) {
                    id = format!("{base}-{n}");
                    n += 1;
                }
                anchors.push(id.clone());
                let depth = level as u8;
                if depth == 2 || depth == 3 {
                    toc.push((depth, id.clone(), plain));
                }
                events.push(Event::Start(Tag::Heading {
                    level,
                    id: Some(CowStr::from(id)),
                    classes: Vec::new(),
                    attrs: Vec::new(),
                }));
                events.append(inner);
                events.push(Event::End(TagEnd::Heading(level)));
                heading = None;
            }
            (Some((_, inner)), e) => inner.push(e),
            (None, e) => events.push(e),
        }
    }
    let mut body = String::new();
    pulldown_cmark::html::push_html(&mut body, events.into_iter());
    Page {
        title: titles()
            .get(path)
            .cloned()
            .unwrap_or_else(|| path.to_owned()),
        body,
        toc,
        anchors,
        links,
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The navigation: top-level pages, then one section per folder.
fn nav(current: &str) -> String {
    let mut sections: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in pages() {
        let section = p.rsplit_once('/').map_or("", |(dir, _)| dir);
        sections.entry(section).or_default().push(p);
    }
    // Reading order: the top level, concepts, guides, the reference, then
    // anything else (benchmarks).
    let rank = |s: &str| match s {
        "" => 0,
        "concepts" => 1,
        "guides" => 2,
        "reference" => 3,
        _ => 4,
    };
    let mut ordered: Vec<(&str, &Vec<&str>)> = sections.iter().map(|(s, l)| (*s, l)).collect();
    ordered.sort_by_key(|(s, _)| (rank(s), *s));
    let mut out = String::from("<ul>\n");
    for (section, list) in ordered {
        if !section.is_empty() {
            let _ = write!(
                out,
                "<li class=\"section\">{}</li>\n<li><ul>\n",
                escape(section)
            );
        }
        // The folder's README first (and getting started at the top).
        let mut list = list.clone();
        list.sort_by_key(|p| {
            (
                !p.ends_with("README.md"),
                !p.ends_with("getting-started.md"),
                *p,
            )
        });
        for p in list {
            let class = if p == current {
                " class=\"current\""
            } else {
                ""
            };
            let title = titles().get(p).map_or(p, String::as_str);
            let _ = writeln!(
                out,
                "<li><a href=\"{}\"{class}>{}</a></li>",
                url_of(p),
                escape(title)
            );
        }
        if !section.is_empty() {
            out.push_str("</ul></li>\n");
        }
    }
    out.push_str("</ul>\n");
    out
}

/// A whole HTML page: navigation, article, table of contents, with the
/// playground's stylesheet and the docs' highlighting script.
pub(crate) fn html(path: &str, page: &Page) -> String {
    let mut toc = String::new();
    for (level, id, text) in &page.toc {
        let _ = writeln!(
            toc,
            "<li class=\"h{level}\"><a href=\"#{id}\">{}</a></li>",
            escape(text)
        );
    }
    shell(&page.title, &nav(path), &page.body, &toc)
}

/// The 404 page of `/docs`, with the navigation.
pub(crate) fn not_found_html() -> String {
    shell(
        "Not found",
        &nav(""),
        "<h1>Not found</h1>\n<p>No such page in the docs. The navigation lists every page.</p>\n",
        "",
    )
}

fn shell(title: &str, nav: &str, body: &str, toc: &str) -> String {
    let style = agentkit_playground::asset_url("style", ".css").unwrap_or_default();
    let script = agentkit_playground::asset_url("docs", ".js").unwrap_or_default();
    let title = escape(title);
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · agentkit docs</title><link rel=\"icon\" href=\"/favicon.ico\">\
<link rel=\"stylesheet\" href=\"{style}\"><script type=\"module\" src=\"{script}\"></script></head>\n\
<body><header><a class=\"brand\" href=\"/\">agentkit</a><span class=\"slug\">docs</span></header>\n\
<div class=\"docs\"><nav class=\"docs-nav\">{nav}</nav>\n\
<article class=\"md\">{body}</article>\n\
<nav class=\"toc\"><ul>{toc}</ul></nav></div></body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_lookups() {
        assert_eq!(url_of("README.md"), "/docs/");
        assert_eq!(url_of("reference/tools.md"), "/docs/reference/tools");
        assert_eq!(lookup(""), Lookup::Page("README.md"));
        assert_eq!(
            lookup("reference/tools"),
            Lookup::Page("reference/tools.md")
        );
        assert_eq!(
            lookup("reference/tools.md"),
            Lookup::Redirect("/docs/reference/tools".into())
        );
        for bad in [
            "../Cargo.toml",
            "reference/../../Cargo",
            "./README",
            "reference//tools",
            "reference\\tools",
            "nope",
        ] {
            assert_eq!(lookup(bad), Lookup::NotFound, "{bad}");
        }
    }

    #[test]
    fn links_are_rewritten_and_headings_get_anchors() {
        let page = render("reference/http-api.md");
        assert!(
            page.body
                .contains("href=\"/docs/guides/serving#embed-the-server\"")
        );
        assert!(page.body.contains("<h2 id=\"post-v1sessionsessionid\">"));
        assert!(page.toc.iter().any(|(_, id, _)| id == "approvals"));
        assert_eq!(page.title, "HTTP API");
        assert_eq!(
            slugify("GET /v1/health and /v1/info"),
            "get-v1health-and-v1info"
        );
        assert_eq!(resolve("reference/a.md", "../../x"), None);
        assert_eq!(
            resolve("reference/a.md", "../guides/b.md").as_deref(),
            Some("guides/b.md")
        );
    }

    /// Every relative link of every page names a served file, and its
    /// fragment a heading of that page.
    #[test]
    fn no_broken_relative_link() {
        let mut broken = Vec::new();
        for path in pages() {
            let page = render(path);
            for (target, fragment) in &page.links {
                let Some(target) = target else { continue };
                let found = agentkit_playground::doc_file(target).is_some();
                let anchor_ok = match (fragment, target.ends_with(".md") && found) {
                    (Some(f), true) => render(target).anchors.contains(f),
                    _ => true,
                };
                if !found || !anchor_ok {
                    broken.push(format!(
                        "{path}: {target}{}",
                        fragment
                            .as_deref()
                            .map(|f| format!("#{f}"))
                            .unwrap_or_default()
                    ));
                }
            }
        }
        assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    }
}
