//! The reference pages list exactly what the code defines: every
//! diagnostic code and every event type. A new code or event without its
//! documentation fails here.

use std::path::PathBuf;

use agentkit::manifest::Code;
use agentkit::protocol::EventType;

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(docs().join(rel)).unwrap_or_else(|e| panic!("docs/{rel}: {e}"))
}

#[test]
fn diagnostics_reference_lists_every_code() {
    let page = read("reference/diagnostics.md");
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !page.contains(&format!("`{c}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/reference/diagnostics.md does not document: {missing:?}"
    );
}

#[test]
fn events_reference_lists_every_event_type() {
    let page = read("reference/events.md");
    let missing: Vec<&str> = EventType::ALL
        .iter()
        .map(|t| t.as_str())
        .filter(|t| !page.contains(&format!("`{t}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/reference/events.md does not document: {missing:?}"
    );
}

#[test]
fn every_docs_link_resolves() {
    let mut broken = Vec::new();
    let mut stack = vec![docs()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (_, rest) in text.match_indices("](").map(|(i, _)| ((), &text[i + 2..])) {
                let Some(end) = rest.find(')') else { continue };
                let target = rest[..end].split('#').next().unwrap_or_default();
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                if !path.parent().unwrap().join(target).exists() {
                    broken.push(format!("{}: {target}", path.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// The role table of `docs/reference/auth.md#roles` is the one the server
/// checks (`serve/roles.rs`), between its markers. `AGENTKIT_BLESS=1`
/// writes it.
#[test]
fn auth_reference_role_table_is_the_codes() {
    let (begin, end) = ("<!-- role-table:begin -->\n", "<!-- role-table:end -->");
    let page = read("reference/auth.md");
    let (Some(b), Some(e)) = (page.find(begin), page.find(end)) else {
        panic!("docs/reference/auth.md lacks the role-table markers");
    };
    let want = agentkit::role_table_markdown();
    let have = &page[b + begin.len()..e];
    if have != want && std::env::var_os("AGENTKIT_BLESS").is_some() {
        let page = format!("{}{want}{}", &page[..b + begin.len()], &page[e..]);
        std::fs::write(docs().join("reference/auth.md"), page).unwrap();
        return;
    }
    assert_eq!(
        have, want,
        "docs/reference/auth.md's role table differs from serve/roles.rs (AGENTKIT_BLESS=1 rewrites it)"
    );
}
