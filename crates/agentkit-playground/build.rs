//! Lists the committed files the crate embeds (`dist/`, the built
//! playground, and `docs/`, the copy of the user docs) as `include_bytes!`
//! entries in `$OUT_DIR/embedded.rs`. Nothing is built here: Node is never
//! needed by `cargo build`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn table(root: &Path, folder: &str, code: &mut String) {
    let base = root.join(folder);
    println!("cargo:rerun-if-changed={folder}");
    let mut files = Vec::new();
    walk(&base, &mut files);
    let _ = writeln!(
        code,
        "pub(crate) static {}: &[(&str, &[u8])] = &[",
        folder.to_uppercase()
    );
    // Sorted as strings: the lookup is a binary search by path.
    let mut rows: Vec<(String, String)> = files
        .iter()
        .filter_map(|file| {
            let rel = file.strip_prefix(&base).ok()?;
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            Some((rel.join("/"), file.display().to_string()))
        })
        .collect();
    rows.sort();
    for (rel, file) in rows {
        let _ = writeln!(code, "    ({rel:?}, include_bytes!({file:?})),");
    }
    code.push_str("];\n");
}

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut code = String::new();
    table(&root, "dist", &mut code);
    table(&root, "docs", &mut code);
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("embedded.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}
