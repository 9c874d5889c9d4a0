//! Tests of `FaultFs` itself: each action, rule counting and ordering, path filters, op counts,
//! random rules, and a crash-at-a-random-point scenario of the kind engine tests run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dfs_broker::{AppendFlag, FaultAction, FaultFs, FaultOp, FaultRule, Fs, FsError, LocalFs};
use tempfile::TempDir;

fn setup() -> (TempDir, Arc<FaultFs>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = LocalFs::new(dir.path().join("fs")).expect("LocalFs::new");
    (dir, FaultFs::new(Arc::new(local)))
}

async fn contents(fs: &dyn Fs, path: &str) -> Vec<u8> {
    let r = fs.open(path).await.expect("open");
    let len = r.length().await.expect("length");
    r.pread(0, len as usize).await.expect("pread")
}

fn is_injected<T>(r: &Result<T, FsError>) -> bool {
    matches!(r, Err(FsError::Injected { .. }))
}

#[tokio::test]
async fn fail_on_the_nth_append() {
    let (_dir, fs) = setup();
    fs.add_rule(FaultRule {
        op: FaultOp::Append,
        path_contains: None,
        after: 2,
        times: Some(1),
        action: FaultAction::Fail,
    });
    let mut w = fs.create("/f", false).await.expect("create");
    w.append(b"a", AppendFlag::Flush).await.expect("1st");
    w.append(b"b", AppendFlag::Flush).await.expect("2nd");
    let r = w.append(b"c", AppendFlag::Flush).await;
    assert!(is_injected(&r), "3rd append: {r:?}");
    w.append(b"d", AppendFlag::Flush).await.expect("4th");
    assert_eq!(w.position(), 3, "a failed append moved the position");
    w.close().await.expect("close");
    assert_eq!(contents(&*fs, "/f").await, b"abd");
    let e = r.expect_err("injected");
    assert_eq!(e.to_string(), "append /f: injected fault");
    assert_eq!(e.kind(), common::ErrorKind::Internal);
}

#[tokio::test]
async fn failed_create_does_nothing() {
    let (_dir, fs) = setup();
    fs.add_rule(FaultRule::new(FaultOp::Create, FaultAction::Fail).times(1));
    assert!(is_injected(&fs.create("/f", false).await));
    assert!(!fs.exists("/f").await.expect("exists"));
    fs.create("/f", false)
        .await
        .expect("2nd create")
        .close()
        .await
        .expect("close");
    assert!(fs.exists("/f").await.expect("exists"));
}

#[tokio::test]
async fn times_limits_and_forever() {
    let (_dir, fs) = setup();
    fs.add_rule(
        FaultRule::new(FaultOp::Exists, FaultAction::Fail)
            .after(1)
            .times(2),
    );
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(fs.exists("/x").await.is_ok());
    }
    assert_eq!(got, [true, false, false, true, true]);

    fs.clear_rules();
    fs.add_rule(FaultRule::new(FaultOp::Mkdirs, FaultAction::Fail));
    for _ in 0..10 {
        assert!(is_injected(&fs.mkdirs("/d").await));
    }
    fs.clear_rules();
    fs.mkdirs("/d").await.expect("after clear_rules");
}

#[tokio::test]
async fn tear_leaves_exactly_keep_bytes() {
    let (_dir, fs) = setup();
    fs.add_rule(FaultRule::new(FaultOp::Append, FaultAction::Tear { keep_bytes: 3 }).nth(2));
    let mut w = fs.create("/log", false).await.expect("create");
    w.append(b"first-", AppendFlag::Flush)
        .await
        .expect("append");
    // Buffered data before the torn write reaches the file too, as it would have.
    w.append(b"buffered-", AppendFlag::None)
        .await
        .expect("append");
    let r = w.append(b"0123456789", AppendFlag::None).await;
    assert!(is_injected(&r), "torn append: {r:?}");
    // Visible without close: the torn prefix is on disk.
    assert_eq!(contents(&*fs, "/log").await, b"first-buffered-012");
    assert_eq!(fs.inner().length("/log").await.expect("length"), 18);
    // keep_bytes beyond the data keeps it all and still fails.
    fs.add_rule(FaultRule::new(FaultOp::Append, FaultAction::Tear { keep_bytes: 100 }).times(1));
    assert!(is_injected(&w.append(b"xy", AppendFlag::Sync).await));
    assert_eq!(contents(&*fs, "/log").await, b"first-buffered-012xy");
}

#[tokio::test]
async fn tear_crash_tears_then_dies() {
    let (_dir, fs) = setup();
    fs.add_rule(FaultRule::new(FaultOp::Sync, FaultAction::TearCrash { keep_bytes: 2 }).nth(1));
    let mut w = fs.create("/log", false).await.expect("create");
    w.append(b"aaaa", AppendFlag::Sync).await.expect("append");
    assert!(is_injected(&w.append(b"bbbb", AppendFlag::Sync).await));
    assert!(fs.crashed());
    assert!(is_injected(&w.append(b"cccc", AppendFlag::Sync).await));
    assert!(is_injected(&w.close().await));
    assert_eq!(contents(&**fs.inner(), "/log").await, b"aaaabb");
}

#[tokio::test]
async fn crash_makes_everything_after_fail() {
    let (_dir, fs) = setup();
    let mut w = fs.create("/a/log", false).await.expect("create");
    w.append(b"flushed", AppendFlag::Flush)
        .await
        .expect("append");
    w.append(b"buffered", AppendFlag::None)
        .await
        .expect("append");
    let r = fs.open("/a/log").await.expect("open");
    fs.add_rule(FaultRule::new(FaultOp::Rename, FaultAction::Crash));
    assert!(!fs.crashed());
    assert!(is_injected(&fs.rename("/a/log", "/a/log2").await));
    assert!(fs.crashed());

    assert!(is_injected(&fs.create("/b", false).await));
    assert!(is_injected(&fs.open("/a/log").await));
    assert!(is_injected(&fs.length("/a/log").await));
    assert!(is_injected(&fs.exists("/a/log").await));
    assert!(is_injected(&fs.readdir("/a").await));
    assert!(is_injected(&fs.mkdirs("/c").await));
    assert!(is_injected(&fs.remove("/a/log").await));
    assert!(is_injected(&fs.rmdir("/a", true).await));
    assert!(is_injected(&w.append(b"more", AppendFlag::Sync).await));
    assert!(is_injected(&w.close().await));
    assert!(is_injected(&r.pread(0, 1).await));
    assert!(is_injected(&r.length().await));
    // Clearing rules does not undo a crash.
    fs.clear_rules();
    assert!(is_injected(&fs.exists("/a/log").await));
    drop(w);

    // What reached the disk: the flushed bytes, not the buffered ones, and no rename.
    let inner = fs.inner();
    assert!(!inner.exists("/a/log2").await.expect("exists"));
    assert!(!inner.exists("/b").await.expect("exists"));
    assert_eq!(contents(&**inner, "/a/log").await, b"flushed");

    // The restarted process.
    fs.revive();
    assert!(!fs.crashed());
    assert_eq!(contents(&*fs, "/a/log").await, b"flushed");
}

#[tokio::test]
async fn delay_delays_then_performs() {
    let (_dir, fs) = setup();
    fs.add_rule(FaultRule::new(
        FaultOp::Create,
        FaultAction::Delay(Duration::from_millis(200)),
    ));
    fs.add_rule(FaultRule::new(
        FaultOp::Append,
        FaultAction::Delay(Duration::from_millis(150)),
    ));
    let t = Instant::now();
    let mut w = fs.create("/f", false).await.expect("create");
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "create took {:?}",
        t.elapsed()
    );
    let t = Instant::now();
    w.append(b"abc", AppendFlag::Flush).await.expect("append");
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "append took {:?}",
        t.elapsed()
    );
    w.close().await.expect("close");
    let t = Instant::now();
    assert_eq!(contents(&*fs, "/f").await, b"abc");
    assert!(
        t.elapsed() < Duration::from_millis(150),
        "reads were delayed too"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_during_a_delay_fails_the_delayed_op() {
    let (_dir, fs) = setup();
    fs.add_rule(FaultRule::new(
        FaultOp::Create,
        FaultAction::Delay(Duration::from_millis(300)),
    ));
    fs.add_rule(FaultRule::new(FaultOp::Mkdirs, FaultAction::Crash));
    let fs2 = fs.clone();
    let slow = tokio::spawn(async move { fs2.create("/slow", false).await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(is_injected(&fs.mkdirs("/d").await));
    let r = slow.await.expect("join");
    assert!(is_injected(&r), "delayed create after crash: {r:?}");
    assert!(!fs.inner().exists("/slow").await.expect("exists"));
}

#[tokio::test]
async fn path_filters() {
    let (_dir, fs) = setup();
    fs.add_rule(FaultRule::new(FaultOp::Any, FaultAction::Fail).path("/log/"));
    fs.add_rule(FaultRule::new(FaultOp::Rename, FaultAction::Fail).path("metadata"));
    assert!(is_injected(&fs.create("/log/0", false).await));
    let mut w = fs
        .create("/cs/0", false)
        .await
        .expect("create outside the filter");
    w.append(b"x", AppendFlag::Sync).await.expect("append");
    w.close().await.expect("close");
    assert!(is_injected(&fs.exists("/log/0").await));
    assert!(
        !fs.exists("/log")
            .await
            .expect("'/log' does not contain '/log/'")
    );
    // A rename matches on either side.
    assert!(is_injected(&fs.rename("/cs/0", "/metadata/0").await));
    fs.create("/metadata/1", false)
        .await
        .expect("create")
        .close()
        .await
        .expect("close");
    assert!(is_injected(&fs.rename("/metadata/1", "/cs/1").await));
    fs.rename("/cs/0", "/cs/1")
        .await
        .expect("rename outside the filters");
    assert_eq!(contents(&*fs, "/cs/1").await, b"x");
}

#[tokio::test]
async fn path_filter_on_writers_and_readers() {
    let (_dir, fs) = setup();
    for p in ["/log/1", "/cs/1"] {
        let mut w = fs.create(p, false).await.expect("create");
        w.append(b"abc", AppendFlag::None).await.expect("append");
        w.close().await.expect("close");
    }
    fs.add_rule(FaultRule::new(FaultOp::Pread, FaultAction::Fail).path("cs"));
    fs.add_rule(FaultRule::new(FaultOp::Close, FaultAction::Fail).path("log"));
    let r = fs.open("/cs/1").await.expect("open");
    assert!(is_injected(&r.pread(0, 3).await));
    assert_eq!(r.length().await.expect("length is not a pread"), 3);
    assert_eq!(contents(&*fs, "/log/1").await, b"abc");
    let mut w = fs.create("/log/2", false).await.expect("create");
    assert!(is_injected(&w.close().await));
    let mut w = fs.create("/cs/2", false).await.expect("create");
    w.close().await.expect("close outside the filter");
}

#[tokio::test]
async fn rules_are_checked_in_order_and_count_separately() {
    let (_dir, fs) = setup();
    // Rule 1 fails the 2nd remove; rule 2 crashes the 3rd remove it sees. Rule 2 counts the
    // op rule 1 failed, so the crash is on the 3rd remove overall.
    fs.add_rule(FaultRule::new(FaultOp::Remove, FaultAction::Fail).nth(1));
    fs.add_rule(FaultRule::new(FaultOp::Remove, FaultAction::Crash).nth(2));
    for i in 0..3 {
        fs.create(&format!("/f{i}"), false)
            .await
            .expect("create")
            .close()
            .await
            .expect("close");
    }
    fs.remove("/f0").await.expect("1st remove");
    assert!(is_injected(&fs.remove("/f1").await));
    assert!(!fs.crashed(), "the 2nd remove fired rule 1, not rule 2");
    assert!(is_injected(&fs.remove("/f2").await));
    assert!(fs.crashed());

    // When two rules are due on the same op, the first wins and the second stays armed.
    let (_dir, fs) = setup();
    fs.add_rule(FaultRule::new(FaultOp::Exists, FaultAction::Fail).times(1));
    fs.add_rule(FaultRule::new(FaultOp::Exists, FaultAction::Crash).times(1));
    assert!(is_injected(&fs.exists("/x").await));
    assert!(!fs.crashed());
    assert!(is_injected(&fs.exists("/x").await));
    assert!(fs.crashed());
}

#[tokio::test]
async fn op_counts() {
    let (_dir, fs) = setup();
    let mut w = fs.create("/d/f", false).await.expect("create");
    w.append(b"1", AppendFlag::None).await.expect("append");
    w.append(b"2", AppendFlag::Flush).await.expect("append");
    w.append(b"3", AppendFlag::Sync).await.expect("append");
    w.close().await.expect("close");
    let r = fs.open("/d/f").await.expect("open");
    r.pread(0, 1).await.expect("pread");
    r.pread(0, 3).await.expect("pread");
    assert!(r.pread(0, 4).await.is_err());
    r.length().await.expect("length");
    fs.length("/d/f").await.expect("length");
    fs.rename("/d/f", "/d/g").await.expect("rename");
    fs.readdir("/d").await.expect("readdir");
    fs.exists("/d/g").await.expect("exists");
    fs.mkdirs("/e").await.expect("mkdirs");
    fs.rmdir("/e", false).await.expect("rmdir");
    fs.remove("/d/g").await.expect("remove");
    assert!(fs.remove("/d/g").await.is_err());

    let want = [
        (FaultOp::Create, 1),
        (FaultOp::Append, 3),
        (FaultOp::Sync, 2),
        (FaultOp::Close, 1),
        (FaultOp::Open, 1),
        (FaultOp::Pread, 3),
        (FaultOp::Length, 2),
        (FaultOp::Rename, 1),
        (FaultOp::Readdir, 1),
        (FaultOp::Exists, 1),
        (FaultOp::Mkdirs, 1),
        (FaultOp::Rmdir, 1),
        (FaultOp::Remove, 2),
        (FaultOp::Any, 18),
    ];
    for (op, n) in want {
        assert_eq!(fs.op_count(op), n, "{op:?}");
    }
}

#[tokio::test]
async fn random_rules_are_deterministic() {
    async fn pattern(seed: u64, p: f64) -> Vec<bool> {
        let (_dir, fs) = setup();
        fs.add_rule(FaultRule::random(FaultOp::Exists, p, seed));
        let mut out = Vec::new();
        for _ in 0..400 {
            out.push(fs.exists("/x").await.is_err());
        }
        out
    }
    let a = pattern(42, 0.25).await;
    assert_eq!(a, pattern(42, 0.25).await, "same seed, same faults");
    assert_ne!(a, pattern(43, 0.25).await, "another seed, other faults");
    let fails = a.iter().filter(|&&f| f).count();
    assert!(
        (60..=140).contains(&fails),
        "{fails} of 400 failed at p = 0.25"
    );
    assert!(pattern(1, 0.0).await.iter().all(|&f| !f));
    assert!(pattern(1, 1.0).await.iter().all(|&f| f));

    // Random with another action, a limit and a filter.
    let (_dir, fs) = setup();
    fs.add_rule(
        FaultRule::new(FaultOp::Mkdirs, FaultAction::Crash)
            .with_probability(0.5, 7)
            .path("/x")
            .after(3),
    );
    for _ in 0..10 {
        fs.mkdirs("/y").await.expect("filtered out");
    }
    let mut n = 0;
    while !fs.crashed() {
        let _ = fs.mkdirs("/x").await;
        n += 1;
        assert!(n < 100);
    }
    assert!(n > 3, "crashed within the first 3 ops it should skip");
}

/// The pattern engine tests follow: run once to count ops, then crash at every point and check
/// that what survived is a prefix of the flushed records.
#[tokio::test]
async fn crash_at_every_point_leaves_a_prefix() {
    async fn workload(fs: &dyn Fs) -> Result<(), FsError> {
        let mut w = fs.create("/log/0", false).await?;
        for i in 0u8..20 {
            w.append(&[i; 10], AppendFlag::Flush).await?;
        }
        w.close().await?;
        fs.rename("/log/0", "/log/done").await
    }
    let (_dir, fs) = setup();
    workload(&*fs).await.expect("clean run");
    let total = fs.op_count(FaultOp::Any);
    assert_eq!(total, 23);
    for k in 0..total {
        let (_dir, fs) = setup();
        fs.add_rule(FaultRule::new(FaultOp::Any, FaultAction::Crash).nth(k));
        assert!(workload(&*fs).await.is_err(), "crash point {k}");
        let inner = fs.inner();
        let path = if inner.exists("/log/done").await.expect("exists") {
            "/log/done"
        } else {
            "/log/0"
        };
        let data = if inner.exists(path).await.expect("exists") {
            contents(&**inner, path).await
        } else {
            Vec::new()
        };
        let want: Vec<u8> = (0u8..20).flat_map(|i| [i; 10]).take(data.len()).collect();
        assert_eq!(data, want, "crash point {k}");
        let flushed = k.saturating_sub(1).min(20) as usize * 10;
        assert_eq!(data.len(), flushed, "crash point {k}");
    }
}
