//! The golden-script runner: each `tests/golden/*.hql` of this crate runs in test mode against
//! a fresh database and its output must equal the `.golden` file beside it. The embedded
//! database's tests (`hql/tests/golden.rs`) and the cluster's (`ht/tests/cluster.rs`) use it.
//!
//! `$DATA` stands for `tests/golden/data/` (input files for LOAD DATA INFILE).
//! `$TMP` in a script stands for a scratch directory; files the script writes under
//! `$TMP/files/` are appended to the output (gzip files decompressed) so that INTO FILE and
//! DUMP TABLE output is checked too. A `<name>.<variant>.golden` file, when present, is what
//! that variant (for example `cluster`) must print instead.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use client::Client;

use crate::shell::{Shell, ShellOptions};

/// The directory of the golden scripts.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The scripts, sorted, as (name, path); `GOLDEN=name` keeps only one.
pub fn scripts() -> Vec<(String, PathBuf)> {
    let only = std::env::var("GOLDEN").ok();
    let mut scripts: Vec<(String, PathBuf)> = std::fs::read_dir(dir())
        .expect("golden dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hql"))
        .map(|p| {
            let name = p.file_stem().expect("stem").to_string_lossy().to_string();
            (name, p)
        })
        .filter(|(n, _)| only.as_ref().is_none_or(|o| o == n))
        .collect();
    scripts.sort();
    scripts
}

/// Runs `script` on `client` in test mode; `tmp` is the script's scratch directory (it gets a
/// `files/` directory). Returns what the shell printed, followed by the files written under
/// `$TMP/files/`, with the scratch and data paths spelled `$TMP` and `$DATA`.
pub fn run_script(client: Arc<dyn Client>, script: &str, tmp: &Path) -> String {
    let files = tmp.join("files");
    std::fs::create_dir_all(&files).expect("files dir");
    let tmp_s = tmp.to_str().expect("utf-8 temp path").to_string();
    let first = script.lines().next().unwrap_or("");
    let flags = if first.starts_with("# --") { first } else { "" };
    let mut shell = Shell::new(
        client,
        ShellOptions {
            batch: true,
            test_mode: true,
            namespace: None,
            // A script whose first line is `# --skip-bad-lines` runs as `ht shell
            // --skip-bad-lines`; `# --timestamp-format nanos` likewise.
            skip_bad_lines: flags.contains("--skip-bad-lines"),
            raw_timestamps: flags.contains("--timestamp-format nanos"),
            ..ShellOptions::default()
        },
    )
    .expect("shell");
    let mut out = Vec::new();
    let mut err = Vec::new();
    let data = dir().join("data");
    let data = data.to_str().expect("utf-8 path");
    let script = script.replace("$TMP", &tmp_s).replace("$DATA", data);
    shell.run_script(&script, &mut out, &mut err);
    assert!(
        err.is_empty(),
        "test mode wrote to stderr: {}",
        String::from_utf8_lossy(&err)
    );
    let mut names: Vec<_> = std::fs::read_dir(&files)
        .expect("read files")
        .map(|e| e.expect("entry").path())
        .collect();
    names.sort();
    for p in names {
        let raw = std::fs::read(&p).expect("read file");
        let name = p.file_name().expect("name").to_string_lossy().to_string();
        let content = if name.ends_with(".gz") {
            let mut s = Vec::new();
            flate2::read::GzDecoder::new(raw.as_slice())
                .read_to_end(&mut s)
                .expect("gunzip");
            s
        } else {
            raw
        };
        out.extend_from_slice(format!("--- file {name} ---\n").as_bytes());
        out.extend_from_slice(&content);
    }
    String::from_utf8_lossy(&out)
        .replace(&tmp_s, "$TMP")
        .replace(data, "$DATA")
}

/// Compares a script's output with its golden file (the variant's, if it has one); `None` if
/// equal, else a message naming the first differing line.
pub fn check(name: &str, script: &Path, variant: Option<&str>, actual: &str) -> Option<String> {
    let golden = variant
        .map(|v| script.with_extension(format!("{v}.golden")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| script.with_extension("golden"));
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    if actual == expected {
        return None;
    }
    let line = actual
        .lines()
        .zip(expected.lines())
        .position(|(a, e)| a != e)
        .unwrap_or(actual.lines().count().min(expected.lines().count()));
    Some(format!(
        "{name}: output differs from {} at line {}:\n  expected: {:?}\n  actual:   {:?}",
        golden.display(),
        line + 1,
        expected.lines().nth(line),
        actual.lines().nth(line)
    ))
}
