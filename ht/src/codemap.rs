//! The code-map test: ARCHITECTURE.md's section for each crate names every `.rs` file in it.
//!
//! A crate's section is the text under its `### \`<dir>/\`` heading, up to the next `###` or
//! `##` heading. A file counts as named if the section contains its path under `src/` (or
//! under the crate directory, for files outside `src/`), its file name, or, for a `mod.rs`,
//! its directory as `name/`. Directories of data rather than code are not searched.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Directories holding build output or data (golden files, fuzz corpora and reproducers).
const SKIPPED_DIRS: [&str; 4] = ["target", "golden", "regressions", "corpus"];

/// The code map's sections by crate directory: the text under each `### \`<dir>/\`` heading,
/// up to the next `###` or `##` heading.
fn sections(doc: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        if line.starts_with("### ") || line.starts_with("## ") {
            current = heading_dir(line);
            if let Some(dir) = &current {
                out.entry(dir.clone()).or_default();
            }
        } else if let Some(text) = current.as_ref().and_then(|dir| out.get_mut(dir)) {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// `Some("rpc")` for the heading "### `rpc/`" (anything may follow the closing backtick).
fn heading_dir(line: &str) -> Option<String> {
    let rest = line.strip_prefix("### `")?;
    let (name, _) = rest.split_once('`')?;
    let dir = name.strip_suffix('/')?;
    (!dir.is_empty()).then(|| dir.to_string())
}

/// Every `.rs` file under `dir`, skipping [`SKIPPED_DIRS`].
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            if !SKIPPED_DIRS.iter().any(|s| entry.file_name() == *s) {
                rust_files(&path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The ways a section may name the file at `rel` (relative to its crate directory): its path
/// with a leading `src/` dropped, its file name, and for `x/mod.rs` the directory `x/`.
fn names_for(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "src") {
        parts.remove(0);
    }
    let file = parts.last().cloned().unwrap_or_default();
    let mut names = vec![parts.join("/"), file.clone()];
    if file == "mod.rs" && parts.len() >= 2 {
        names.push(format!("{}/", parts[parts.len() - 2]));
    }
    names
}

/// The files (as `<crate>/<path>`, sorted) that their crate's section of `doc` does not name,
/// and how many files were checked. Crates whose directory does not exist under `root` are
/// passed over (`testdata/` has a section but no code).
fn unnamed(root: &Path, doc: &str) -> std::io::Result<(Vec<String>, usize)> {
    let mut missing = Vec::new();
    let mut checked = 0;
    for (dir, text) in sections(doc) {
        let crate_dir = root.join(&dir);
        if !crate_dir.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&crate_dir, &mut files)?;
        for file in files {
            let rel = file.strip_prefix(&crate_dir).unwrap_or(&file);
            checked += 1;
            if !names_for(rel).iter().any(|n| text.contains(n.as_str())) {
                let rel: Vec<_> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect();
                missing.push(format!("{dir}/{}", rel.join("/")));
            }
        }
    }
    missing.sort();
    Ok((missing, checked))
}

#[test]
fn the_code_map_names_every_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("ht/ sits in the repository root");
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md reads");
    assert!(
        sections(&doc).contains_key("ht"),
        "ARCHITECTURE.md has no ### `ht/` section: the heading format changed?"
    );
    let (missing, checked) = unnamed(root, &doc).expect("the crate directories read");
    assert!(
        checked > 0,
        "no source files found under {}",
        root.display()
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map does not name these {} files in their crate's section \
         (add each with its role, in one line):\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_check_finds_a_file_its_section_does_not_name() {
    let root = std::env::temp_dir().join(format!("ht-codemap-{}", std::process::id()));
    for file in [
        "a/src/lib.rs",
        "a/src/x/mod.rs",
        "a/src/y.rs",
        "a/src/z/w.rs",
        "a/tests/t.rs",
        "a/golden/g.rs",
        "a/README.md",
        "b/src/main.rs",
    ] {
        let path = root.join(file);
        fs::create_dir_all(path.parent().expect("a file has a directory")).expect("mkdir");
        fs::write(&path, "").expect("write");
    }
    let doc = "# T\n## Code map\n### `a/` (the crate)\n- `lib.rs`, `x/`, `z/w.rs`, `tests/t.rs`\n\
               ### `b/`\n- `y.rs` is named in b, not in a\n### `none/`\n## Invariants\n- `main.rs`\n";
    let result = unnamed(&root, doc);
    fs::remove_dir_all(&root).expect("clean up");
    let (missing, checked) = result.expect("the directories read");
    assert_eq!(checked, 6, "golden/ and non-.rs files are skipped");
    assert_eq!(missing, ["a/src/y.rs", "b/src/main.rs"]);
}
