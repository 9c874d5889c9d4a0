//! `FaultFs`: an [`Fs`] wrapper that fails, tears, delays or "crashes" chosen operations, so
//! tests can drive the commit log, cell store writes, compactions and metadata writes through
//! the failures a real file system produces.
//!
//! A test adds [`FaultRule`]s; every operation (including appends, preads and closes on the
//! writers and readers the wrapper hands out) is checked against them in order. Each rule counts
//! the operations it matches on its own; the first rule that is due fires and decides the
//! operation's fate, later rules still count the operation but do not fire for it.
//!
//! Random rules ([`FaultRule::random`], [`FaultRule::with_probability`]) draw from a seeded
//! splitmix64 stream kept in the rule, so a run is reproducible from its seeds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::{AppendFlag, DirEntry, Fs, FsError, FsReader, FsResult, FsWriter};

/// The operations a rule can select.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// `Fs::create`.
    Create,
    /// Every `FsWriter::append`, whatever its flag.
    Append,
    /// An `FsWriter::append` with [`AppendFlag::Flush`] or [`AppendFlag::Sync`].
    Sync,
    /// `FsReader::pread`.
    Pread,
    /// `Fs::remove`.
    Remove,
    /// `Fs::rename` (a path filter matches either the source or the target).
    Rename,
    /// `FsWriter::close`.
    Close,
    /// `Fs::open`.
    Open,
    /// `Fs::length` and `FsReader::length`.
    Length,
    /// `Fs::rmdir`.
    Rmdir,
    /// `Fs::mkdirs`.
    Mkdirs,
    /// `Fs::readdir`.
    Readdir,
    /// `Fs::exists`.
    Exists,
    /// Every operation above.
    Any,
}

impl FaultOp {
    /// Number of kinds, for the counters (`Any` is the last variant).
    const KINDS: usize = FaultOp::Any as usize + 1;

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            FaultOp::Create => "create",
            FaultOp::Append | FaultOp::Sync => "append",
            FaultOp::Pread => "pread",
            FaultOp::Remove => "remove",
            FaultOp::Rename => "rename",
            FaultOp::Close => "close",
            FaultOp::Open => "open",
            FaultOp::Length => "length",
            FaultOp::Rmdir => "rmdir",
            FaultOp::Mkdirs => "mkdirs",
            FaultOp::Readdir => "readdir",
            FaultOp::Exists => "exists",
            FaultOp::Any => "any",
        }
    }
}

/// What happens to an operation a rule fires on.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// The operation returns [`FsError::Injected`] and does nothing.
    Fail,
    /// For appends: the first `keep_bytes` of the data (and anything the writer had buffered)
    /// reach the file, then the append fails: a torn write. Other operations just fail.
    Tear { keep_bytes: usize },
    /// A torn write (as `Tear`) at the moment the process dies (as `Crash`).
    TearCrash { keep_bytes: usize },
    /// Sleeps (`tokio::time::sleep`), then performs the operation.
    Delay(Duration),
    /// Like `Fail`, and every later operation on this `FaultFs` (and on its writers and readers)
    /// fails too: the process died, nothing after this point reaches the disk. Data a writer
    /// buffered with `append(None)` is lost, since its `close` now fails.
    Crash,
    /// Performs `action` with the given probability, drawn from a stream seeded by `seed`.
    /// Built by [`FaultRule::random`] / [`FaultRule::with_probability`].
    Random {
        probability: f64,
        seed: u64,
        action: Box<FaultAction>,
    },
}

/// Selects operations and says what to do to them.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    pub op: FaultOp,
    /// Only operations whose path contains this string match.
    pub path_contains: Option<String>,
    /// Skip this many matching operations first.
    pub after: u64,
    /// Fire at most this many times; `None` = forever.
    pub times: Option<u64>,
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule firing on every `op`, forever.
    pub fn new(op: FaultOp, action: FaultAction) -> Self {
        Self {
            op,
            path_contains: None,
            after: 0,
            times: None,
            action,
        }
    }

    /// A rule failing each `op` with the given probability, deterministically from `seed`.
    pub fn random(op: FaultOp, probability: f64, seed: u64) -> Self {
        Self::new(op, FaultAction::Fail).with_probability(probability, seed)
    }

    /// Fails (or crashes, ...) only operations on paths containing `s`.
    pub fn path(mut self, s: impl Into<String>) -> Self {
        self.path_contains = Some(s.into());
        self
    }

    /// Skips the first `n` matching operations.
    pub fn after(mut self, n: u64) -> Self {
        self.after = n;
        self
    }

    /// Fires at most `n` times.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    /// Fires once, on the operation after the first `n` matching ones.
    pub fn nth(self, n: u64) -> Self {
        self.after(n).times(1)
    }

    /// Makes the rule's action happen only with `probability` (0.0..=1.0) per due operation.
    pub fn with_probability(mut self, probability: f64, seed: u64) -> Self {
        self.action = FaultAction::Random {
            probability,
            seed,
            action: Box::new(self.action),
        };
        self
    }
}

/// A rule and its counters.
struct RuleState {
    rule: FaultRule,
    /// Matching operations seen.
    seen: u64,
    /// Times the rule fired.
    fired: u64,
    /// splitmix64 state for `FaultAction::Random`.
    rng: u64,
}

impl RuleState {
    fn new(rule: FaultRule) -> Self {
        let rng = match &rule.action {
            FaultAction::Random { seed, .. } => *seed,
            _ => 0,
        };
        Self {
            rule,
            seen: 0,
            fired: 0,
            rng,
        }
    }

    fn matches(&self, op: FaultOp, is_sync: bool, paths: &[&str]) -> bool {
        let op_ok = match self.rule.op {
            FaultOp::Any => true,
            FaultOp::Sync => is_sync,
            want => want == op,
        };
        op_ok
            && match &self.rule.path_contains {
                None => true,
                Some(s) => paths.iter().any(|p| p.contains(s.as_str())),
            }
    }

    /// Next uniform draw in [0, 1).
    fn next_f64(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// State shared by a `FaultFs` and the writers and readers it hands out.
struct Shared {
    rules: Mutex<Vec<RuleState>>,
    crashed: AtomicBool,
    counts: [AtomicU64; FaultOp::KINDS],
}

/// What an operation should do after the rules were consulted.
enum Verdict {
    Proceed,
    Fail,
    Tear { keep_bytes: usize, crash: bool },
    Delay(Duration),
}

impl Shared {
    fn injected(op: FaultOp, path: &str) -> FsError {
        FsError::Injected {
            op: op.name(),
            path: path.to_string(),
        }
    }

    fn count(&self, op: FaultOp) {
        self.counts[op.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts the operation and consults the rules.
    fn judge(&self, op: FaultOp, is_sync: bool, paths: &[&str]) -> Verdict {
        self.count(op);
        if is_sync {
            self.count(FaultOp::Sync);
        }
        self.count(FaultOp::Any);
        if self.crashed.load(Ordering::SeqCst) {
            return Verdict::Fail;
        }
        let mut rules = self.rules.lock();
        let mut chosen: Option<FaultAction> = None;
        for rs in rules.iter_mut() {
            if !rs.matches(op, is_sync, paths) {
                continue;
            }
            rs.seen += 1;
            if chosen.is_some() || rs.seen <= rs.rule.after {
                continue;
            }
            if rs.rule.times.is_some_and(|t| rs.fired >= t) {
                continue;
            }
            let action = match &rs.rule.action {
                FaultAction::Random {
                    probability,
                    action,
                    ..
                } => {
                    let (p, a) = (*probability, (**action).clone());
                    if rs.next_f64() >= p {
                        continue;
                    }
                    a
                }
                a => a.clone(),
            };
            rs.fired += 1;
            chosen = Some(action);
        }
        drop(rules);
        match chosen {
            None => Verdict::Proceed,
            Some(action) => self.verdict(action),
        }
    }

    fn verdict(&self, action: FaultAction) -> Verdict {
        match action {
            FaultAction::Fail => Verdict::Fail,
            FaultAction::Tear { keep_bytes } => Verdict::Tear {
                keep_bytes,
                crash: false,
            },
            FaultAction::TearCrash { keep_bytes } => Verdict::Tear {
                keep_bytes,
                crash: true,
            },
            FaultAction::Delay(d) => Verdict::Delay(d),
            FaultAction::Crash => {
                self.crashed.store(true, Ordering::SeqCst);
                Verdict::Fail
            }
            // A Random wrapping a Random: the outer draw already passed.
            FaultAction::Random { action, .. } => self.verdict(*action),
        }
    }

    /// Runs the rules for a non-append operation: `Ok(())` means go ahead.
    async fn gate(&self, op: FaultOp, paths: &[&str]) -> FsResult<()> {
        match self.judge(op, false, paths) {
            Verdict::Proceed => Ok(()),
            Verdict::Fail => Err(Self::injected(op, paths[0])),
            Verdict::Tear { crash, .. } => {
                // Only appends can tear; anything else just fails (and dies, for TearCrash).
                if crash {
                    self.crashed.store(true, Ordering::SeqCst);
                }
                Err(Self::injected(op, paths[0]))
            }
            Verdict::Delay(d) => {
                tokio::time::sleep(d).await;
                self.after_delay(op, paths[0])
            }
        }
    }

    /// A crash may have happened while the operation slept.
    fn after_delay(&self, op: FaultOp, path: &str) -> FsResult<()> {
        if self.crashed.load(Ordering::SeqCst) {
            Err(Self::injected(op, path))
        } else {
            Ok(())
        }
    }
}

/// An [`Fs`] that injects faults into another one. See the module docs.
pub struct FaultFs {
    inner: Arc<dyn Fs>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultFs({})", self.inner.url())
    }
}

impl FaultFs {
    /// Wraps `inner`, with no rules.
    pub fn new(inner: Arc<dyn Fs>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            shared: Arc::new(Shared {
                rules: Mutex::new(Vec::new()),
                crashed: AtomicBool::new(false),
                counts: std::array::from_fn(|_| AtomicU64::new(0)),
            }),
        })
    }

    /// The wrapped file system (to inspect what reached it, e.g. after a crash).
    pub fn inner(&self) -> &Arc<dyn Fs> {
        &self.inner
    }

    /// Appends a rule; rules are consulted in the order they were added.
    pub fn add_rule(&self, rule: FaultRule) {
        self.shared.rules.lock().push(RuleState::new(rule));
    }

    /// Removes every rule (a crash stays in effect; see [`FaultFs::revive`]).
    pub fn clear_rules(&self) {
        self.shared.rules.lock().clear();
    }

    /// True once a `Crash` rule fired.
    pub fn crashed(&self) -> bool {
        self.shared.crashed.load(Ordering::SeqCst)
    }

    /// Forgets a crash, so the same wrapper can play the restarted process. Writers and readers
    /// opened before the crash work again too; tests of a restart should not use them.
    pub fn revive(&self) {
        self.shared.crashed.store(false, Ordering::SeqCst);
    }

    /// Operations seen so far of kind `op` (`Any` counts all; `Sync` counts flush and sync
    /// appends, which also count as `Append`). Operations that failed count too.
    pub fn op_count(&self, op: FaultOp) -> u64 {
        self.shared.counts[op.index()].load(Ordering::Relaxed)
    }
}

#[async_trait]
impl Fs for FaultFs {
    fn lock_exclusive(&self, path: &str) -> FsResult<Option<crate::FsLock>> {
        self.inner.lock_exclusive(path)
    }

    async fn create(&self, path: &str, overwrite: bool) -> FsResult<Box<dyn FsWriter>> {
        self.shared.gate(FaultOp::Create, &[path]).await?;
        let inner = self.inner.create(path, overwrite).await?;
        Ok(Box::new(FaultWriter {
            inner,
            shared: self.shared.clone(),
        }))
    }

    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        self.shared.gate(FaultOp::Open, &[path]).await?;
        let inner = self.inner.open(path).await?;
        Ok(Arc::new(FaultReader {
            inner,
            shared: self.shared.clone(),
        }))
    }

    async fn length(&self, path: &str) -> FsResult<u64> {
        self.shared.gate(FaultOp::Length, &[path]).await?;
        self.inner.length(path).await
    }

    async fn remove(&self, path: &str) -> FsResult<()> {
        self.shared.gate(FaultOp::Remove, &[path]).await?;
        self.inner.remove(path).await
    }

    async fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()> {
        self.shared.gate(FaultOp::Rmdir, &[path]).await?;
        self.inner.rmdir(path, recursive).await
    }

    async fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        self.shared.gate(FaultOp::Rename, &[from, to]).await?;
        self.inner.rename(from, to).await
    }

    async fn mkdirs(&self, path: &str) -> FsResult<()> {
        self.shared.gate(FaultOp::Mkdirs, &[path]).await?;
        self.inner.mkdirs(path).await
    }

    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        self.shared.gate(FaultOp::Readdir, &[path]).await?;
        self.inner.readdir(path).await
    }

    async fn exists(&self, path: &str) -> FsResult<bool> {
        self.shared.gate(FaultOp::Exists, &[path]).await?;
        self.inner.exists(path).await
    }

    fn url(&self) -> String {
        format!("fault+{}", self.inner.url())
    }
}

/// A writer whose appends and close go through the rules.
struct FaultWriter {
    inner: Box<dyn FsWriter>,
    shared: Arc<Shared>,
}

#[async_trait]
impl FsWriter for FaultWriter {
    async fn append(&mut self, data: &[u8], flag: AppendFlag) -> FsResult<()> {
        let is_sync = flag != AppendFlag::None;
        let path = self.inner.path().to_string();
        match self.shared.judge(FaultOp::Append, is_sync, &[&path]) {
            Verdict::Proceed => {}
            Verdict::Fail => return Err(Shared::injected(FaultOp::Append, &path)),
            Verdict::Tear { keep_bytes, crash } => {
                // The torn prefix must really reach the file, so it is flushed whatever the
                // caller asked for; a crash is declared only once it is there.
                let keep = keep_bytes.min(data.len());
                let res = self
                    .inner
                    .append(&data[..keep], flag.max(AppendFlag::Flush))
                    .await;
                if crash {
                    self.shared.crashed.store(true, Ordering::SeqCst);
                }
                res?;
                return Err(Shared::injected(FaultOp::Append, &path));
            }
            Verdict::Delay(d) => {
                tokio::time::sleep(d).await;
                self.shared.after_delay(FaultOp::Append, &path)?;
            }
        }
        self.inner.append(data, flag).await
    }

    fn position(&self) -> u64 {
        self.inner.position()
    }

    async fn close(&mut self) -> FsResult<()> {
        let path = self.inner.path().to_string();
        self.shared.gate(FaultOp::Close, &[&path]).await?;
        self.inner.close().await
    }

    fn path(&self) -> &str {
        self.inner.path()
    }
}

/// A reader whose preads and length calls go through the rules.
struct FaultReader {
    inner: Arc<dyn FsReader>,
    shared: Arc<Shared>,
}

#[async_trait]
impl FsReader for FaultReader {
    async fn pread(&self, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        self.shared
            .gate(FaultOp::Pread, &[self.inner.path()])
            .await?;
        self.inner.pread(offset, len).await
    }

    async fn length(&self) -> FsResult<u64> {
        self.shared
            .gate(FaultOp::Length, &[self.inner.path()])
            .await?;
        self.inner.length().await
    }

    fn path(&self) -> &str {
        self.inner.path()
    }

    fn prefetch(&self, offset: u64, len: usize) {
        self.inner.prefetch(offset, len)
    }
}
