//! Bounded answers: the `limit` and opaque `cursor` every list route
//! takes (`limit` 100 by default, at most 1,000), and one page cut out of
//! a list already ordered newest first, continued after a key (keyset, so
//! an item added meanwhile neither repeats nor hides another). A leaf: it
//! imports no other module of `serve/`.

use std::fmt::Write as _;

use agentkit_protocol::api::{SESSION_PAGE_DEFAULT, SESSION_PAGE_MAX};

/// Why a page's query was refused (answered `400`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadPage(pub(crate) String);

/// One page's request: how many items and after which key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageQuery {
    pub(crate) limit: usize,
    /// The key of the previous page's last item.
    pub(crate) after: Option<String>,
}

/// The page `limit` and `cursor` (of kind `kind`, see [`cursor_of`]) ask
/// for.
pub(crate) fn page_query(
    kind: &str,
    limit: Option<u32>,
    cursor: Option<&str>,
) -> Result<PageQuery, BadPage> {
    let limit = match limit {
        None => SESSION_PAGE_DEFAULT,
        Some(0) => return Err(BadPage("`limit` must be at least 1".into())),
        Some(n) => n.min(SESSION_PAGE_MAX),
    };
    let after = cursor
        .map(|c| {
            key_of(kind, c).ok_or_else(|| {
                BadPage(
                    "invalid `cursor`: pass the `nextCursor` of the previous page as it is".into(),
                )
            })
        })
        .transpose()?;
    Ok(PageQuery {
        limit: limit as usize,
        after,
    })
}

/// The opaque cursor that continues after `key`: the kind (a letter and a
/// version) and the key in hex, so clients pass it back as it is and the
/// encoding may change.
pub(crate) fn cursor_of(kind: &str, key: &str) -> String {
    let mut out = String::from(kind);
    for b in key.as_bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The key a [`cursor_of`] cursor of `kind` continues after; `None` when
/// it is not one.
pub(crate) fn key_of(kind: &str, cursor: &str) -> Option<String> {
    let hex = cursor.strip_prefix(kind)?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// One page of `items`, which are ordered newest first, that is by `key`
/// descending: the first `limit` items whose key is below `after`, and
/// the cursor of the next page when more remain.
pub(crate) fn page<T>(
    items: impl IntoIterator<Item = T>,
    kind: &str,
    query: &PageQuery,
    key: impl Fn(&T) -> String,
) -> (Vec<T>, Option<String>) {
    let mut rest = items.into_iter().filter(|item| {
        query
            .after
            .as_deref()
            .is_none_or(|after| *key(item) < *after)
    });
    let out: Vec<T> = rest.by_ref().take(query.limit).collect();
    let next = match (rest.next(), out.last()) {
        (Some(_), Some(last)) => Some(cursor_of(kind, &key(last))),
        _ => None,
    };
    (out, next)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn check(items: &[&str], limit: u32) -> String {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let q = page_query("t1", Some(limit), cursor.as_deref()).unwrap();
            let (got, next) = page(items.iter().copied(), "t1", &q, |s| (*s).to_owned());
            out.push(got.join(","));
            match next {
                Some(c) => cursor = Some(c),
                None => return out.join(" | "),
            }
        }
    }

    #[test]
    fn pages_follow_the_cursor_newest_first_to_the_end() {
        let items = ["e", "d", "c", "b", "a"];
        assert_eq!(check(&items, 2), "e,d | c,b | a");
        assert_eq!(check(&items, 5), "e,d,c,b,a");
        assert_eq!(check(&items, 1000), "e,d,c,b,a");
        assert_eq!(check(&[], 3), "");
    }

    #[test]
    fn an_item_added_between_pages_neither_repeats_nor_hides_another() {
        let q = page_query("t1", Some(2), None).unwrap();
        let (first, next) = page(["d", "c", "b", "a"], "t1", &q, |s| (*s).to_owned());
        assert_eq!(first, ["d", "c"]);
        let q = page_query("t1", Some(2), next.as_deref()).unwrap();
        let (second, _) = page(["e", "d", "c", "b", "a"], "t1", &q, |s| (*s).to_owned());
        assert_eq!(second, ["b", "a"]);
    }

    #[test]
    fn a_bad_limit_or_cursor_is_refused() {
        assert!(page_query("t1", Some(0), None).is_err());
        assert!(page_query("t1", None, Some("zz")).is_err());
        assert!(page_query("t1", None, Some(&cursor_of("s1", "x"))).is_err());
        assert_eq!(page_query("t1", Some(5000), None).unwrap().limit, 1000);
        assert_eq!(page_query("t1", None, None).unwrap().limit, 100);
        let c = cursor_of("t1", "2026-01-01T00:00:00Z\ncall_1");
        assert_eq!(
            page_query("t1", None, Some(&c)).unwrap().after.as_deref(),
            Some("2026-01-01T00:00:00Z\ncall_1")
        );
    }
}
