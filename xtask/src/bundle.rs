//! The copies `agentkit-playground` embeds, kept fresh: the playground
//! bundle (`dist/`, built from `web/` by `npm run build`, which records the
//! hash of its sources) and the docs copy (`docs/`, refreshed by
//! `cargo xtask sync-docs`). A crate installed from crates.io cannot read
//! outside its folder, so these are committed; tidy fails when either is
//! stale.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use sha2::{Digest as _, Sha256};

/// The crate that embeds both copies.
pub(crate) const CRATE: &str = "crates/agentkit-playground";

/// What the bundle is built from, relative to `web/`: the same list as
/// `SOURCES` in `web/build.mjs`.
const SOURCES: [&str; 7] = [
    "build.mjs",
    "index.html",
    "package.json",
    "package-lock.json",
    "tsconfig.json",
    "public",
    "src",
];

/// Files under `path` (itself when a file), as paths relative to `base`
/// with `/`, skipping nothing: the sources have no generated files.
fn files(base: &Path, path: &Path, out: &mut Vec<String>) -> anyhow::Result<()> {
    if path.is_dir() {
        let entries = std::fs::read_dir(path)
            .with_context(|| format!("failed to list {}", path.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("failed to list {}", path.display()))?;
            files(base, &entry.path(), out)?;
        }
    } else if path.is_file() {
        let rel = path.strip_prefix(base).unwrap_or(path);
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        out.push(parts.join("/"));
    }
    Ok(())
}

/// sha256 over each source file in path order: its path, a newline, its
/// length in bytes, a newline, its bytes (as `sourceHash` in build.mjs).
pub(crate) fn source_hash(web: &Path) -> anyhow::Result<String> {
    let mut all = Vec::new();
    for s in SOURCES {
        files(web, &web.join(s), &mut all)?;
    }
    all.sort();
    let mut hasher = Sha256::new();
    for rel in &all {
        let bytes =
            std::fs::read(web.join(rel)).with_context(|| format!("failed to read web/{rel}"))?;
        hasher.update(format!("{rel}\n{}\n", bytes.len()).as_bytes());
        hasher.update(&bytes);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Every file under `dir`, relative to it, sorted.
fn tree(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    if dir.is_dir() {
        files(dir, dir, &mut out)?;
    }
    out.sort();
    Ok(out)
}

/// Problems with the committed copies, one line each.
pub(crate) fn check(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    let krate = root.join(CRATE);
    let recorded = std::fs::read_to_string(krate.join("dist/source-hash.txt")).unwrap_or_default();
    let actual = source_hash(&krate.join("web"))?;
    if recorded.trim() != actual {
        problems.push(format!(
            "{CRATE}/dist: stale: built from other sources than web/ holds (run `npm ci && npm run build` in {CRATE}/web and commit dist/)"
        ));
    }
    let docs = root.join("docs");
    let copy = krate.join("docs");
    let (want, have) = (tree(&docs)?, tree(&copy)?);
    let fix = "run `cargo xtask sync-docs` and commit";
    for rel in &want {
        if !have.contains(rel) {
            problems.push(format!(
                "{CRATE}/docs/{rel}: missing from the docs copy ({fix})"
            ));
        } else if std::fs::read(docs.join(rel))? != std::fs::read(copy.join(rel))? {
            problems.push(format!(
                "{CRATE}/docs/{rel}: differs from docs/{rel} ({fix})"
            ));
        }
    }
    for rel in have.iter().filter(|r| !want.contains(r)) {
        problems.push(format!("{CRATE}/docs/{rel}: not in docs/ ({fix})"));
    }
    Ok(problems)
}

/// Replaces the docs copy with the current `docs/`.
pub(crate) fn sync_docs(root: &Path) -> anyhow::Result<()> {
    let docs = root.join("docs");
    let copy: PathBuf = root.join(CRATE).join("docs");
    if copy.exists() {
        std::fs::remove_dir_all(&copy)
            .with_context(|| format!("failed to remove {}", copy.display()))?;
    }
    for rel in tree(&docs)? {
        let to = copy.join(&rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("failed to create {}", parent.display()))?;
        }
        std::fs::copy(docs.join(&rel), &to)
            .with_context(|| format!("failed to copy docs/{rel}"))?;
    }
    Ok(())
}
