//! The README's test command (`./test`) does its own set-up: on a machine without moto it makes
//! the project-local virtual environment `.venv/`, installs `moto[server]` there, puts it
//! first on PATH (and in HT_MOTO_PYTHON, which the S3 test server starts), then runs nextest
//! on the whole workspace. Run here on a copy of the script with stub `python3`, `cargo` and
//! `cargo-nextest`, so nothing is downloaded.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn write_exe(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write stub");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A copy of `./test` in a fresh directory, with stubs on PATH that log what they are asked
/// to `log`: `python3 -m venv DIR` makes a stub interpreter in DIR whose `import moto.server`
/// works only after a `pip install`.
fn sandbox() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("repo");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::copy(repo().join("test"), root.join("test")).expect("copy ./test");
    let bin = dir.path().join("bin");
    let log = dir.path().join("log");
    let venv_python = format!(
        r#"case "$*" in
  *"import moto.server"*) [ -f "$(dirname "$0")/moto-installed" ] ;;
  *"pip install"*) echo "pip $*" >> {log}; touch "$(dirname "$0")/moto-installed" ;;
  *) exit 3 ;;
esac"#,
        log = log.display()
    );
    let stub_dir = dir.path().join("venv-python");
    std::fs::write(&stub_dir, &venv_python).expect("write venv python body");
    write_exe(
        &bin.join("python3"),
        &format!(
            r#"if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  echo "venv $3" >> {log}
  mkdir -p "$3/bin"
  {{ echo '#!/bin/sh'; cat {stub}; }} > "$3/bin/python3"
  chmod +x "$3/bin/python3"
else
  exit 3
fi"#,
            log = log.display(),
            stub = stub_dir.display()
        ),
    );
    write_exe(&bin.join("cargo-nextest"), "exit 0");
    write_exe(
        &bin.join("cargo"),
        &format!(
            r#"{{ echo "cargo $*"; echo "PATH=$PATH"; echo "HT_MOTO_PYTHON=$HT_MOTO_PYTHON"; }} >> {log}"#,
            log = log.display()
        ),
    );
    (dir, root)
}

fn run(dir: &Path, root: &Path) -> String {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(root.join("test"))
        .arg("some_filter")
        .env("PATH", path)
        .env_remove("HT_MOTO_PYTHON")
        .env_remove("PYTHON")
        .output()
        .expect("run ./test");
    assert!(
        out.status.success(),
        "./test failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    std::fs::remove_file(dir.join("log")).ok();
    log
}

#[test]
fn the_readme_test_command_installs_moto_in_a_project_venv() {
    let (dir, root) = sandbox();
    let venv = root.join(".venv");

    // A fresh machine: the virtual environment is made and moto installed into it.
    let log = run(dir.path(), &root);
    assert!(log.contains(&format!("venv {}", venv.display())), "{log}");
    assert!(
        log.contains("pip -m pip install") && log.contains("moto[server]"),
        "{log}"
    );
    let cargo = log
        .lines()
        .find(|l| l.starts_with("cargo "))
        .unwrap_or_else(|| panic!("cargo not run: {log}"));
    assert_eq!(
        cargo,
        "cargo nextest run --workspace --no-fail-fast some_filter"
    );
    assert!(
        log.contains(&format!("PATH={}/bin:", venv.display())),
        "the venv is not first on PATH: {log}"
    );
    assert!(
        log.contains(&format!("HT_MOTO_PYTHON={}/bin/python3", venv.display())),
        "{log}"
    );

    // The next run finds moto there and installs nothing.
    let log = run(dir.path(), &root);
    assert!(!log.contains("venv ") && !log.contains("pip "), "{log}");
    assert!(
        log.contains("cargo nextest run --workspace --no-fail-fast"),
        "{log}"
    );
}

#[test]
fn the_readme_and_ci_run_the_test_command() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let block = readme
        .split("```sh\n")
        .nth(1)
        .expect("the README's first sh block");
    let lines: Vec<&str> = block.lines().take(2).collect();
    assert!(
        lines[0].starts_with("cargo run --release -p ht -- shell"),
        "{lines:?}"
    );
    assert!(lines[1].starts_with("./test "), "{lines:?}");
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect(".ci/run");
    let steps: Vec<&str> = ci
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    let at = |needle: &str| {
        steps
            .iter()
            .position(|l| l.trim() == needle)
            .unwrap_or_else(|| panic!(".ci/run lacks `{needle}`"))
    };
    assert!(at("cargo fmt --all -- --check") < at("./test"));
    assert!(at("cargo clippy --workspace --all-targets -- -D warnings") < at("./test"));
    assert!(
        !steps
            .iter()
            .any(|l| l.contains("nextest run") || l.contains("pip install")),
        ".ci/run sets up or runs tests by itself:\n{ci}"
    );
}
