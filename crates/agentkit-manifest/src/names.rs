//! Names: what a file stem may be, reserved slugs, and "did you mean".

/// Path segments a multi-agent host uses itself, so no agent may take them.
pub const RESERVED_SLUGS: &[&str] = &["v1", "playground", "docs"];

/// Is `s` usable as an agent slug or a channel, connection, hook,
/// schedule, skill, subagent or experiment name:
/// `[A-Za-z0-9][A-Za-z0-9_-]*`, at most 64 characters.
pub fn is_valid_slug(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphanumeric())
        && s.len() <= 64
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Is `s` usable as a tool name the model sees. Model APIs accept
/// `[A-Za-z0-9_-]{1,64}`; agentkit also requires a letter first so names
/// read as identifiers, and keeps `__` free for MCP namespacing.
pub fn is_valid_tool_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic())
        && s.len() <= 64
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !s.contains("__")
}

/// The closest candidate to `word`, when one is close enough to be what
/// the author meant.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let word_lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            (
                strsim::jaro_winkler(&word_lower, &c.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        for ok in ["weather-agent", "a", "A1_b-c", "concierge"] {
            assert!(is_valid_slug(ok), "{ok}");
        }
        for bad in ["", "-x", "_x", "a b", "a/b", "é", "a.b", &"x".repeat(65)] {
            assert!(!is_valid_slug(bad), "{bad}");
        }
    }

    #[test]
    fn tool_names() {
        for ok in ["get_weather", "echo", "A-b_1"] {
            assert!(is_valid_tool_name(ok), "{ok}");
        }
        for bad in [
            "",
            "1x",
            "_x",
            "get weather",
            "a.b",
            "linear__search",
            &"x".repeat(65),
        ] {
            assert!(!is_valid_tool_name(bad), "{bad}");
        }
    }

    #[test]
    fn suggestions() {
        assert_eq!(did_you_mean("tool", ["tools", "skills"]), Some("tools"));
        assert_eq!(
            did_you_mean("needs_aproval", ["needs_approval", "timeout"]),
            Some("needs_approval")
        );
        assert_eq!(did_you_mean("zzz", ["tools", "skills"]), None);
    }
}
