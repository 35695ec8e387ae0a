//! Images a tool returns, to the model and into the log by reference.
//!
//! A user message may carry images (uploaded files that are images, by
//! workspace path). A tool's output may be a list of content items (as MCP's are), some of
//! them images: `{"type": "image", "mediaType", "data"}` (base64), or
//! `{"type": "image", "path"}` naming a workspace file. [`stash`] writes
//! inline bytes into the workspace (`.agentkit/images/<callId>-<n>.<ext>`)
//! and leaves `{"type": "image", "mediaType", "path"}` in their place, so
//! the log and the conversation hold a reference and never the bytes.
//! [`hydrate`] reads the referenced files back for the provider request
//! (a copy for the request only), which each provider sends in its own
//! wire format.

use std::path::Path;

use agentkit_protocol::{ImageRef, Message};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// The largest image sent to a model (5 MiB, Anthropic's limit); a larger
/// one is sent as a note naming its path.
const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

fn is_image(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("image")
}

/// Does `output` hold an image item?
pub(crate) fn has_images(output: &Value) -> bool {
    output
        .as_array()
        .is_some_and(|items| items.iter().any(is_image))
}

/// How many image items `output` holds.
pub(crate) fn count(output: &Value) -> usize {
    output
        .as_array()
        .map_or(0, |items| items.iter().filter(|i| is_image(i)).count())
}

fn extension(media_type: &str) -> &'static str {
    match media_type {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "bin",
    }
}

fn media_type_of(path: &str) -> &'static str {
    // The image types the providers take.
    match agentkit_plumbing::content_type(path) {
        t @ ("image/png" | "image/jpeg" | "image/gif" | "image/webp") => t,
        _ => "application/octet-stream",
    }
}

/// `output` with each inline image written into `workspace` and replaced
/// by its path. An image whose data is not base64, or that cannot be
/// written, becomes a text item saying so.
pub(crate) fn stash(workspace: &Path, call_id: &str, output: Value) -> Value {
    let Value::Array(items) = output else {
        return output;
    };
    let safe_id: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut n = 0;
    let items = items
        .into_iter()
        .map(|item| {
            let Some(data) = item.get("data").and_then(Value::as_str).filter(|_| is_image(&item))
            else {
                return item;
            };
            let media_type = item
                .get("mediaType")
                .or_else(|| item.get("mimeType"))
                .and_then(Value::as_str)
                .unwrap_or("image/png")
                .to_owned();
            let bytes = match STANDARD.decode(data.trim()) {
                Ok(bytes) => bytes,
                Err(e) => {
                    return json!({"type": "text", "text": format!("(an image whose data is not base64: {e})")});
                }
            };
            n += 1;
            let rel = format!(".agentkit/images/{safe_id}-{n}.{}", extension(&media_type));
            let written = crate::confine_path(workspace, &rel)
                .map_err(|e| e.to_string())
                .and_then(|full| {
                    if let Some(parent) = full.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                    }
                    std::fs::write(&full, &bytes).map_err(|e| e.to_string())
                });
            match written {
                Ok(()) => image_value(ImageRef {
                    media_type,
                    path: rel,
                    data: None,
                }),
                Err(e) => json!({"type": "text", "text": format!("(an image that could not be kept: {e})")}),
            }
        })
        .collect();
    Value::Array(items)
}

/// A copy of `conversation` whose messages and tool outputs carry the
/// bytes of the images they reference (`data`, base64, read from
/// `workspace` under its path guard), for a provider request; `None` when
/// nothing has an image. An image that cannot be read becomes a note in
/// its message's text.
pub fn hydrate(workspace: &Path, conversation: &[Message]) -> Option<Vec<Message>> {
    let any = conversation.iter().any(|m| match m {
        Message::Tool { output, .. } => has_images(output),
        Message::User { images, .. } => !images.is_empty(),
        Message::Assistant { .. } => false,
    });
    if !any {
        return None;
    }
    Some(
        conversation
            .iter()
            .map(|m| match m {
                Message::Tool {
                    call_id,
                    tool_name,
                    output,
                    is_error,
                } if has_images(output) => Message::Tool {
                    call_id: call_id.clone(),
                    tool_name: tool_name.clone(),
                    output: load(workspace, output),
                    is_error: *is_error,
                },
                Message::User { text, images } if !images.is_empty() => {
                    // An image that cannot be sent becomes a note in the text.
                    let mut text = text.clone();
                    let mut loaded = Vec::new();
                    for image in images {
                        match read(workspace, image) {
                            Ok(image) => loaded.push(image),
                            Err(note) => {
                                text.push('\n');
                                text.push_str(&note);
                            }
                        }
                    }
                    Message::User {
                        text,
                        images: loaded,
                    }
                }
                other => other.clone(),
            })
            .collect(),
    )
}

fn load(workspace: &Path, output: &Value) -> Value {
    let Some(items) = output.as_array() else {
        return output.clone();
    };
    let items = items
        .iter()
        .map(|item| {
            if !is_image(item) || item.get("data").is_some() {
                return item.clone();
            }
            let Some(rel) = item.get("path").and_then(Value::as_str) else {
                return item.clone();
            };
            let media_type = item
                .get("mediaType")
                .and_then(Value::as_str)
                .unwrap_or_else(|| media_type_of(rel))
                .to_owned();
            let image = ImageRef {
                media_type,
                path: rel.to_owned(),
                data: None,
            };
            match read(workspace, &image) {
                Ok(image) => image_value(image),
                Err(note) => json!({"type": "text", "text": note}),
            }
        })
        .collect();
    Value::Array(items)
}

/// `image` with its bytes read from `workspace` (base64), or why it
/// cannot be sent (a note for the model).
fn read(workspace: &Path, image: &ImageRef) -> Result<ImageRef, String> {
    let rel = &image.path;
    let bytes = crate::confine_path(workspace, rel)
        .map_err(|e| e.to_string())
        .and_then(|full| std::fs::read(full).map_err(|e| e.to_string()))
        .map_err(|e| format!("(image `{rel}` cannot be read: {e})"))?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(format!(
            "(image `{rel}` is {} bytes, over the {MAX_IMAGE_BYTES} bytes sent to a model)",
            bytes.len()
        ));
    }
    Ok(ImageRef {
        data: Some(STANDARD.encode(bytes)),
        ..image.clone()
    })
}

/// An image as a tool output's item.
fn image_value(image: ImageRef) -> Value {
    serde_json::to_value(image).unwrap_or_default()
}

/// The image items of a tool output that carry their bytes:
/// `(media type, base64 data)`.
pub(crate) fn inline_images(output: &Value) -> Vec<(String, String)> {
    output
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|i| is_image(i))
                .filter_map(|i| {
                    Some((
                        i.get("mediaType")?.as_str()?.to_owned(),
                        i.get("data")?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A tool output's text for a wire format that takes text only in a tool
/// result: its text items, and a note per image.
pub(crate) fn text_of(output: &Value) -> String {
    let Some(items) = output.as_array() else {
        return match output {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    };
    items
        .iter()
        .map(|i| match i.get("type").and_then(Value::as_str) {
            Some("text") => i
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Some("image") => format!(
                "[image{}]",
                i.get("path")
                    .and_then(Value::as_str)
                    .map(|p| format!(" {p}"))
                    .unwrap_or_default()
            ),
            _ => i.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn inline_images_are_kept_in_the_workspace_and_read_back_for_the_request() {
        let tmp = tempfile::tempdir().unwrap();
        let out = json!([
            {"type": "text", "text": "a chart"},
            {"type": "image", "mediaType": "image/png", "data": STANDARD.encode(b"PNGDATA")},
        ]);
        let kept = stash(tmp.path(), "call/1", out);
        assert_eq!(
            kept[1],
            json!({"type": "image", "mediaType": "image/png", "path": ".agentkit/images/call_1-1.png"})
        );
        assert_eq!(
            std::fs::read(tmp.path().join(".agentkit/images/call_1-1.png")).unwrap(),
            b"PNGDATA"
        );
        let conversation = vec![Message::Tool {
            call_id: "c".into(),
            tool_name: "t".into(),
            output: kept,
            is_error: false,
        }];
        let hydrated = hydrate(tmp.path(), &conversation).unwrap();
        let Message::Tool { output, .. } = &hydrated[0] else {
            panic!()
        };
        assert_eq!(
            inline_images(output),
            [("image/png".to_owned(), STANDARD.encode(b"PNGDATA"))]
        );
        assert_eq!(
            text_of(output),
            "a chart\n[image .agentkit/images/call_1-1.png]"
        );
        let escape = json!([{"type": "image", "path": "../x.png"}]);
        assert!(
            load(tmp.path(), &escape)[0]["text"]
                .as_str()
                .unwrap()
                .contains("cannot be read")
        );
    }
}
