//! Corruption harness shared by the test crates of the formats ht writes (issue 12): damage one
//! file of a pristine directory written by the real writer (flip a byte, truncate, delete), open
//! the copy with the real reader, and classify the outcome as the exact original data, an error
//! naming the file, or a loss (less or different data with success, always a defect).
//!
//! Standard library only and no crate of its own: test crates include it with
//! `#[path = "../../testsupport/corrupt.rs"] mod corrupt;`, so no library crate gains a
//! dependency (or a feature that would rebuild `common` and everything above it) for a test
//! helper. The seed of the sampled positions is printed with every failure and taken from
//! `HT_CORRUPT_SEED` when set, so a failing sample can be replayed exactly.

#![allow(dead_code)]

use std::fmt::{Debug, Display};
use std::path::{Path, PathBuf};

/// One way of damaging a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// XOR the byte at `offset` with `mask` (never 0).
    Flip { offset: u64, mask: u8 },
    /// Cut the file to `len` bytes.
    Truncate { len: u64 },
    /// Remove the file.
    Delete,
}

/// What opening the damaged copy gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Success with exactly the original data.
    Identical,
    /// An error whose message names the file (the message).
    Error(String),
}

/// A failed case: the damage and what was wrong with the outcome.
#[derive(Debug, Clone)]
pub struct Failure {
    pub damage: Damage,
    pub problem: String,
}

/// Counts of a run, for the test to assert on (e.g. that flips in checksummed bytes are
/// errors rather than all identical).
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub identical: usize,
    pub errors: usize,
    /// Damages whose outcome was `Identical`, for assertions about which bytes may be unused.
    pub identical_damages: Vec<Damage>,
}

/// A small seeded generator (SplitMix64): enough for choosing positions, and no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A non-zero XOR mask.
    pub fn mask(&mut self) -> u8 {
        (self.below(255) + 1) as u8
    }
}

/// The seed for sampled positions: `HT_CORRUPT_SEED` if set, else a fixed one.
pub fn seed() -> u64 {
    if let Ok(s) = std::env::var("HT_CORRUPT_SEED") {
        return s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("HT_CORRUPT_SEED={s:?} is not a u64"));
    }
    // Fixed, so CI repeats what ran here; set the variable to sample other positions.
    0x5EED_C0DE
}

/// Chooses the damages for one file of `len` bytes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: u64,
    pub damages: Vec<Damage>,
}

impl Plan {
    /// A plan with no damages yet, seeded by [`seed`].
    pub fn new() -> Self {
        Plan {
            seed: seed(),
            damages: Vec::new(),
        }
    }

    /// Flips every byte of `0..len`, each with a seeded mask (exhaustive, for small files).
    pub fn flip_every_byte(mut self, len: u64) -> Self {
        let mut rng = Rng::new(self.seed);
        for offset in 0..len {
            let mask = rng.mask();
            self.damages.push(Damage::Flip { offset, mask });
        }
        self
    }

    /// Flips `count` seeded positions of `0..len` (all of them if `len <= count`), plus the
    /// given `also` positions (block headers, trailers: places worth always hitting).
    pub fn flip_sample(mut self, len: u64, count: usize, also: &[u64]) -> Self {
        if len <= count as u64 {
            return self.flip_every_byte(len);
        }
        let mut rng = Rng::new(self.seed);
        for &offset in also.iter().filter(|&&o| o < len) {
            let mask = rng.mask();
            self.damages.push(Damage::Flip { offset, mask });
        }
        for _ in 0..count {
            let offset = rng.below(len);
            let mask = rng.mask();
            self.damages.push(Damage::Flip { offset, mask });
        }
        self
    }

    /// Truncates at each of `boundaries` (block starts and ends), one byte either side of each,
    /// at 0, 1, half and `len - 1`, and at `extra` seeded lengths; lengths `>= len` are skipped.
    pub fn truncate_at(mut self, len: u64, boundaries: &[u64], extra: usize) -> Self {
        let mut rng = Rng::new(self.seed ^ 0x7472_756E_6361_7465);
        let mut lens: Vec<u64> = vec![0, 1, len / 2, len.saturating_sub(1)];
        for &b in boundaries {
            lens.extend([b.saturating_sub(1), b, b + 1]);
        }
        for _ in 0..extra {
            if len > 0 {
                lens.push(rng.below(len));
            }
        }
        lens.sort_unstable();
        lens.dedup();
        self.damages.extend(
            lens.into_iter()
                .filter(|&l| l < len)
                .map(|len| Damage::Truncate { len }),
        );
        self
    }

    /// Deletes the file.
    pub fn delete(mut self) -> Self {
        self.damages.push(Damage::Delete);
        self
    }
}

impl Default for Plan {
    fn default() -> Self {
        Self::new()
    }
}

/// Applies `damage` to `file`.
pub fn apply(file: &Path, damage: Damage) -> std::io::Result<()> {
    match damage {
        Damage::Flip { offset, mask } => {
            let mut bytes = std::fs::read(file)?;
            let b = bytes.get_mut(offset as usize).ok_or_else(|| {
                std::io::Error::other(format!("{}: no byte at {offset}", file.display()))
            })?;
            *b ^= mask;
            std::fs::write(file, bytes)
        }
        Damage::Truncate { len } => std::fs::OpenOptions::new()
            .write(true)
            .open(file)?
            .set_len(len),
        Damage::Delete => std::fs::remove_file(file),
    }
}

/// Copies the directory tree `from` to `to` (created; must not exist).
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

/// Every file under `dir` (relative path) with its bytes.
fn snapshot_tree(dir: &Path) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap_or(&p).to_path_buf();
                out.push((rel, std::fs::read(&p)?));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Makes `scratch` hold exactly the files of `tree` again, rewriting only what differs (far
/// cheaper than a fresh copy when a case touched one file).
fn restore(scratch: &Path, tree: &[(PathBuf, Vec<u8>)]) -> std::io::Result<()> {
    let mut stack = vec![scratch.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(scratch).unwrap_or(&p);
                if tree
                    .binary_search_by(|(r, _)| r.as_path().cmp(rel))
                    .is_err()
                {
                    std::fs::remove_file(&p)?;
                }
            }
        }
    }
    for (rel, bytes) in tree {
        let p = scratch.join(rel);
        if std::fs::read(&p).ok().as_deref() != Some(bytes.as_slice()) {
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, bytes)?;
        }
    }
    Ok(())
}

/// Sizes of the files of one directory level: a cheap check that opening wrote nothing.
fn listing(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                    out.push((p.strip_prefix(dir).unwrap_or(&p).to_path_buf(), len));
                }
            }
        }
    }
    out.sort();
    out
}

/// `Debug` of a value, cut to a readable length.
fn short<T: Debug>(v: &T) -> String {
    let mut s = format!("{v:?}");
    if s.len() > 400 {
        let mut cut = 400;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// A corruption run over one file of a pristine directory.
///
/// `pristine` is a directory written by the real writer; `file` is the file to damage, relative
/// to it; `name` is what an error must mention (usually the file's name); `expected` is the
/// exact data the writer wrote. For each damage of `plan` the directory is copied afresh to a
/// scratch directory, the copy of `file` is damaged and `open(copy)` is called; the outcome
/// must be `Ok(expected)` or an error whose `Display` contains `name`. Anything else (success
/// with other data, an error that does not name the file, a panic) is collected, and the test
/// panics at the end with every failure, the seed and how to replay it.
pub fn run<T, E, F>(
    what: &str,
    pristine: &Path,
    file: &Path,
    name: &str,
    expected: &T,
    plan: &Plan,
    open: F,
) -> Report
where
    T: PartialEq + Debug,
    E: Display,
    F: FnMut(&Path) -> Result<T, E>,
{
    run_with(what, pristine, file, expected, plan, open, |_, msg| {
        if msg.contains(name) {
            Ok(())
        } else {
            Err(format!("the error does not name {name:?}"))
        }
    })
}

/// [`run`] with a caller's judgement of error messages: `judge(damage, message)` returns
/// `Err(why)` for an error that is not good enough (e.g. one that names the file but not the
/// offset of a damaged block).
pub fn run_with<T, E, F, J>(
    what: &str,
    pristine: &Path,
    file: &Path,
    expected: &T,
    plan: &Plan,
    open: F,
    judge: J,
) -> Report
where
    T: PartialEq + Debug,
    E: Display,
    F: FnMut(&Path) -> Result<T, E>,
    J: Fn(Damage, &str) -> Result<(), String>,
{
    run_expecting(what, pristine, file, &|_| expected, plan, open, judge)
}

/// [`run_with`] where the exact data expected depends on the damage: for the one crash shape a
/// format repairs (a cut at the end of its newest log), `expected(damage)` is the state a crash
/// at that point leaves, which the outcome must equal exactly; for every other damage it is the
/// original data. The undamaged copy must open to `expected(Damage::Delete)` (the original).
pub fn run_expecting<'a, T, E, F, J>(
    what: &str,
    pristine: &Path,
    file: &Path,
    expected: &dyn Fn(Damage) -> &'a T,
    plan: &Plan,
    mut open: F,
    judge: J,
) -> Report
where
    T: PartialEq + Debug + 'a,
    E: Display,
    F: FnMut(&Path) -> Result<T, E>,
    J: Fn(Damage, &str) -> Result<(), String>,
{
    let scratch_root = pristine
        .parent()
        .map(|p| p.join(format!("scratch-{}", std::process::id())))
        .expect("the pristine directory has a parent");
    // The pristine copy itself must open to the expected data, or the run proves nothing.
    let _ = std::fs::remove_dir_all(&scratch_root);
    copy_dir(pristine, &scratch_root).expect("copy the pristine directory");
    match open(&scratch_root) {
        Ok(v) if v == *expected(Damage::Delete) => {}
        Ok(v) => panic!(
            "{what}: the undamaged copy opens to other data: {}",
            short(&v)
        ),
        Err(e) => panic!("{what}: the undamaged copy does not open: {e}"),
    }
    let before = listing(pristine);
    let tree = snapshot_tree(pristine).expect("read the pristine directory");
    let mut report = Report::default();
    let mut failures = Vec::new();
    for &damage in &plan.damages {
        restore(&scratch_root, &tree).expect("restore the scratch copy");
        let target = scratch_root.join(file);
        if let Err(e) = apply(&target, damage) {
            panic!(
                "{what}: cannot apply {damage:?} to {}: {e}",
                target.display()
            );
        }
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| open(&scratch_root)));
        match got {
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(Failure {
                    damage,
                    problem: format!("open panicked: {msg}"),
                });
            }
            Ok(Ok(v)) if v == *expected(damage) => {
                report.identical += 1;
                report.identical_damages.push(damage);
            }
            Ok(Ok(v)) => failures.push(Failure {
                damage,
                problem: format!("LOSS: opened with success but other data: {}", short(&v)),
            }),
            Ok(Err(e)) => {
                let msg = e.to_string();
                match judge(damage, &msg) {
                    Ok(()) => report.errors += 1,
                    Err(why) => failures.push(Failure {
                        damage,
                        problem: format!("{why}: {msg}"),
                    }),
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch_root);
    assert_eq!(
        before,
        listing(pristine),
        "{what}: the pristine directory changed"
    );
    if !failures.is_empty() {
        let mut msg = format!(
            "{what}: {} of {} damages of {} failed (seed {}; replay with HT_CORRUPT_SEED={}):\n",
            failures.len(),
            plan.damages.len(),
            file.display(),
            plan.seed,
            plan.seed
        );
        for f in failures.iter().take(40) {
            msg.push_str(&format!("  {:?}: {}\n", f.damage, f.problem));
        }
        if failures.len() > 40 {
            msg.push_str(&format!("  ... and {} more\n", failures.len() - 40));
        }
        panic!("{msg}");
    }
    report
}
