//! Golden tests of the shell: each `tests/golden/*.hql` runs in test mode against a fresh
//! embedded database and its output must equal the `.golden` file beside it.
//!
//! `$DATA` stands for `tests/golden/data/` (input files for LOAD DATA INFILE).
//! `$TMP` in a script stands for a scratch directory; files the script writes under
//! `$TMP/files/` are appended to the output (gzip files decompressed) so that INTO FILE and
//! DUMP TABLE output is checked too. `UPDATE_GOLDEN=1 cargo test -p hql --test golden`
//! rewrites the expected files.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use client::embedded::{EmbeddedClient, EmbeddedOptions};
use hql::shell::{Shell, ShellOptions};

fn run_script(script: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = dir.path().join("files");
    std::fs::create_dir(&files).expect("files dir");
    let tmp = dir.path().to_str().expect("utf-8 temp path").to_string();
    let client = Arc::new(
        EmbeddedClient::open(dir.path().join("db"), EmbeddedOptions::default()).expect("open"),
    );
    let mut shell = Shell::new(
        client.clone(),
        ShellOptions {
            batch: true,
            test_mode: true,
            namespace: None,
            // A script that starts with `# --skip-bad-lines` runs as `ht shell --skip-bad-lines`.
            skip_bad_lines: script.starts_with("# --skip-bad-lines"),
        },
    )
    .expect("shell");
    let mut out = Vec::new();
    let mut err = Vec::new();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/data");
    let script = script.replace("$TMP", &tmp).replace("$DATA", data);
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
        .replace(&tmp, "$TMP")
        .replace(data, "$DATA")
}

#[test]
fn golden() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let only = std::env::var("GOLDEN").ok();
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .expect("golden dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hql"))
        .collect();
    scripts.sort();
    assert!(!scripts.is_empty());
    let mut failed = Vec::new();
    for script in scripts {
        let name = script
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .to_string();
        if only.as_ref().is_some_and(|o| *o != name) {
            continue;
        }
        let text = std::fs::read_to_string(&script).expect("read script");
        let actual = run_script(&text);
        let golden = script.with_extension("golden");
        if update {
            std::fs::write(&golden, &actual).expect("write golden");
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if actual != expected {
            let line = actual
                .lines()
                .zip(expected.lines())
                .position(|(a, e)| a != e)
                .unwrap_or(actual.lines().count().min(expected.lines().count()));
            eprintln!(
                "{name}: output differs from {} at line {}:\n  expected: {:?}\n  actual:   {:?}",
                golden.display(),
                line + 1,
                expected.lines().nth(line),
                actual.lines().nth(line)
            );
            failed.push(name);
        }
    }
    assert!(
        failed.is_empty(),
        "golden files differ: {failed:?} (UPDATE_GOLDEN=1 rewrites them)"
    );
}
