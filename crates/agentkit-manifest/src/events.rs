//! Event names in definition files, checked against the vocabulary.

use agentkit_protocol::EventType;

use crate::diagnostic::{Code, Diagnostic};
use crate::names;
use crate::source::SourceText;

/// `*` or a name from the event vocabulary.
pub(crate) fn check_event_name(src: &SourceText, key: &str, name: &str) -> Result<(), Diagnostic> {
    if name == "*" || name.parse::<EventType>().is_ok() {
        return Ok(());
    }
    let hint = names::did_you_mean(name, EventType::ALL.iter().map(|t| t.as_str()))
        .map(|s| format!("did you mean `{s}`?"))
        .unwrap_or_else(|| {
            "use `*` or a type from the event vocabulary (docs/reference/events.md)".to_owned()
        });
    Err(Diagnostic::error(
        Code::UnknownEvent,
        src.rel.clone(),
        format!("unknown event `{name}`"),
    )
    .at(src
        .key_pos(key)
        .or_else(|| src.text.find(name).map(|o| src.position(o))))
    .with_hint(hint))
}
