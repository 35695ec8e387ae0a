//! A session's workspace as files, for its owner (the HTTP routes
//! `GET/PUT /v1/session/:id/files…`) and for host code (`host.files`):
//! list it a page at a time, read a file, write one. A part
//! (`runtime.files()`).
//!
//! Every path goes through the one workspace guard
//! ([`workspace::safe_join`], as per-send `workspaceFiles` do): absolute
//! paths, `..` and symbolic links resolving outside are refused (`400`).
//! A write is at most [`MAX_FILE_BYTES`]; parent folders are created.
//! The workspace is materialised first (the agent's seeds), so a file
//! written before the first turn is not overwritten by them. Writing while
//! a turn runs is allowed, as a follow-up's `workspaceFiles` are: the
//! turn's next tool call sees the file.
//!
//! A workspace is a folder on the host that serves the request: on a
//! shared store each host has its own copy of a session's workspace, and
//! these calls read and write this host's.

use std::cmp::Ordering as CmpOrdering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentkit_protocol::api::WorkspaceEntry;

use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::runtime::AgentRuntime;
use crate::session::Session;
use crate::workspace;

/// The largest file one write takes (8 MiB); larger is `413`.
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;

/// A session's workspace files. Cheap: borrows the runtime.
#[derive(Debug, Clone, Copy)]
pub struct Files<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// A session's workspace as files: list, read, write.
    pub fn files(&self) -> Files<'_> {
        Files { rt: self }
    }
}

/// Who asks: a principal (checked as for the session: its owner or an
/// operator), or host code (any session of the agent).
#[derive(Debug, Clone, Copy)]
pub enum FilesCaller<'o> {
    Principal(&'o Owner),
    Host,
}

/// One page of a workspace listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePage {
    pub files: Vec<WorkspaceEntry>,
    /// The last entry's path when more remain (the next page continues
    /// after it).
    pub next: Option<String>,
}

/// A file opened for download.
#[derive(Debug)]
pub struct OpenedFile {
    pub file: tokio::fs::File,
    pub size: u64,
    /// Guessed from the extension ([`content_type`]).
    pub content_type: &'static str,
}

impl Files<'_> {
    /// Where the session's workspace is (`[local] cwd`, else beside its
    /// log), for `owner`. It may not exist yet: it is made when a turn or
    /// a call first needs it.
    pub async fn dir(&self, id: &str, owner: &Owner) -> Result<PathBuf> {
        Ok(self.rt.sessions().owned(id, owner).await?.workspace.clone())
    }

    async fn session(&self, id: &str, caller: FilesCaller<'_>) -> Result<Arc<Session>> {
        let session = match caller {
            FilesCaller::Principal(owner) => self.rt.sessions().owned(id, owner).await?,
            FilesCaller::Host => self.rt.sessions().get(id).await?,
        };
        self.rt.turns().ready(&session).await?;
        self.rt.turns().ensure_workspace(&session).await?;
        Ok(session)
    }

    /// The workspace's entries after `after` (a path of a previous page),
    /// at most `limit` of them, depth first.
    pub async fn list(
        &self,
        id: &str,
        caller: FilesCaller<'_>,
        limit: usize,
        after: Option<String>,
    ) -> Result<FilePage> {
        let session = self.session(id, caller).await?;
        let root = session.workspace.clone();
        tokio::task::spawn_blocking(move || list_page(&root, limit.max(1), after.as_deref()))
            .await
            .map_err(|e| Error::task("workspace listing", e))?
    }

    /// Opens file `path` of the workspace: `404` when there is none,
    /// `400` for a folder or a path that leaves the workspace.
    pub async fn open(&self, id: &str, caller: FilesCaller<'_>, path: &str) -> Result<OpenedFile> {
        let session = self.session(id, caller).await?;
        let full = workspace::safe_join(&session.workspace, path)?;
        let meta = match tokio::fs::metadata(&full).await {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound {
                    what: "workspace file",
                    id: path.to_owned(),
                });
            }
            Err(e) => return Err(Error::io("read", &full, e)),
        };
        if meta.is_dir() {
            return Err(Error::BadRequest {
                message: format!(
                    "`{path}` is a folder: list the workspace with GET /v1/session/{id}/files"
                ),
            });
        }
        let file = tokio::fs::File::open(&full)
            .await
            .map_err(|e| Error::io("open", &full, e))?;
        Ok(OpenedFile {
            file,
            size: meta.len(),
            content_type: content_type(path),
        })
    }

    /// The whole of file `path` (as [`open`](Self::open)).
    pub async fn read(&self, id: &str, caller: FilesCaller<'_>, path: &str) -> Result<Vec<u8>> {
        use tokio::io::AsyncReadExt;
        let mut opened = self.open(id, caller, path).await?;
        let mut bytes = Vec::with_capacity(usize::try_from(opened.size).unwrap_or(0));
        opened
            .file
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| Error::io("read", Path::new(path), e))?;
        Ok(bytes)
    }

    /// Writes `bytes` to `path` in the workspace, creating its parent
    /// folders: `413` over [`MAX_FILE_BYTES`], `400` for a path that
    /// leaves the workspace or names a folder. Answers the size written.
    pub async fn write(
        &self,
        id: &str,
        caller: FilesCaller<'_>,
        path: &str,
        bytes: Vec<u8>,
    ) -> Result<u64> {
        check_size(path, bytes.len())?;
        agentkit_harness::check_relative_path(path).map_err(|e| Error::BadRequest {
            message: e.to_string(),
        })?;
        let session = self.session(id, caller).await?;
        let root = session.workspace.clone();
        let rel = path.to_owned();
        tokio::task::spawn_blocking(move || write_file(&root, &rel, &bytes))
            .await
            .map_err(|e| Error::task("workspace write", e))?
    }
}

/// The most images one message attaches.
pub(crate) const MAX_ATTACHED_IMAGES: usize = 8;

/// The per-send files that are images (by their first bytes: PNG, JPEG,
/// GIF, WebP), as the items a user message attaches:
/// `{"type": "image", "mediaType", "path"}`; the first
/// [`MAX_ATTACHED_IMAGES`] of them.
pub(crate) fn attached_images(files: &[(String, Vec<u8>)]) -> Vec<agentkit_protocol::ImageRef> {
    files
        .iter()
        .filter_map(|(path, bytes)| {
            let media_type = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
                "image/png"
            } else if bytes.starts_with(b"\xff\xd8\xff") {
                "image/jpeg"
            } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
                "image/gif"
            } else if bytes.len() > 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
                "image/webp"
            } else {
                return None;
            };
            Some(agentkit_protocol::ImageRef {
                media_type: media_type.to_owned(),
                path: path.clone(),
                data: None,
            })
        })
        .take(MAX_ATTACHED_IMAGES)
        .collect()
}

/// `413` naming the cap when `len` is over it.
pub fn check_size(path: &str, len: usize) -> Result<()> {
    if len > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            message: format!(
                "`{path}` is {len} bytes, over the cap of {MAX_FILE_BYTES} bytes (8 MiB) per workspace file"
            ),
        });
    }
    Ok(())
}

fn write_file(root: &Path, rel: &str, bytes: &[u8]) -> Result<u64> {
    let full = workspace::safe_join(root, rel)?;
    if full.is_dir() {
        return Err(Error::BadRequest {
            message: format!("`{rel}` is a folder in the workspace; name a file"),
        });
    }
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
    }
    // Checked again now that the folders exist: a link made meanwhile
    // cannot lead the write out.
    let full = workspace::safe_join(root, rel)?;
    std::fs::write(&full, bytes).map_err(|e| Error::io("write", &full, e))?;
    Ok(bytes.len() as u64)
}

/// Compares two workspace paths in listing order: component by component
/// (so a folder's entries come right after it, before a sibling named
/// like it with a suffix).
fn path_order(a: &str, b: &str) -> CmpOrdering {
    a.split('/').cmp(b.split('/'))
}

/// Is `inner` inside folder `dir` (both workspace paths)?
fn is_inside(inner: &str, dir: &str) -> bool {
    inner.len() > dir.len() && inner.starts_with(dir) && inner.as_bytes()[dir.len()] == b'/'
}

fn list_page(root: &Path, limit: usize, after: Option<&str>) -> Result<FilePage> {
    let mut files = Vec::new();
    let mut more = false;
    walk(root, "", after, limit, &mut files, &mut more)?;
    let next = if more {
        files.last().map(|e| e.path.clone())
    } else {
        None
    };
    Ok(FilePage { files, next })
}

/// Depth first through `dir` (workspace path `prefix`), entries sorted by
/// name, skipping what is not after `after` and stopping once `limit`
/// entries are taken and one more is seen (`more`).
fn walk(
    dir: &Path,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
    out: &mut Vec<WorkspaceEntry>,
    more: &mut bool,
) -> Result<()> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        // A name that is not UTF-8 cannot be addressed by a route's path.
        if let Ok(name) = entry.file_name().into_string() {
            names.push((name, entry.path()));
        }
    }
    names.sort();
    for (name, full) in names {
        if *more {
            return Ok(());
        }
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let (skip_self, descend) = match after {
            None => (false, true),
            Some(cursor) => match path_order(&path, cursor) {
                CmpOrdering::Greater => (false, true),
                CmpOrdering::Equal => (true, true),
                CmpOrdering::Less => (true, is_inside(cursor, &path)),
            },
        };
        let Ok(meta) = std::fs::symlink_metadata(&full) else {
            continue;
        };
        let kind = if meta.file_type().is_symlink() {
            "symlink"
        } else if meta.is_dir() {
            "dir"
        } else {
            "file"
        };
        if !skip_self {
            if out.len() == limit {
                *more = true;
                return Ok(());
            }
            out.push(WorkspaceEntry {
                path: path.clone(),
                kind: kind.to_owned(),
                size: if kind == "dir" { 0 } else { meta.len() },
                modified_at: meta.modified().ok().map(|t| {
                    chrono::DateTime::<chrono::Utc>::from(t)
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                }),
            });
        }
        if kind == "dir" && descend {
            walk(&full, &path, after, limit, out, more)?;
        }
    }
    Ok(())
}

/// The content type a download of `path` is answered with (by its
/// extension).
pub fn content_type(path: &str) -> &'static str {
    agentkit_harness::content_type(path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_depth_first_order_and_continue_after_the_cursor() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for f in ["a/x.txt", "a/y/z.md", "a-b.txt", "b.txt"] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "hi").unwrap();
        }
        let all = list_page(root, 100, None).unwrap();
        let paths: Vec<_> = all.files.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["a", "a/x.txt", "a/y", "a/y/z.md", "a-b.txt", "b.txt"]
        );
        assert_eq!(all.next, None);
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = list_page(root, 2, after.as_deref()).unwrap();
            seen.extend(page.files.into_iter().map(|e| e.path));
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(seen, paths);
        assert_eq!(content_type("x/shot.PNG"), "image/png");
        assert_eq!(content_type("x/blob"), "application/octet-stream");
    }
}
