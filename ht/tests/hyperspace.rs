//! Hyperspace with real processes: three `ht serve hyperspace` replicas on loopback, killed with
//! SIGKILL and partitioned while clients lock, unlock and write attributes; a checker finds no
//! two exclusive holders at any moment and no lost acknowledged write (the checker in
//! `testsupport/lock_history.rs`, shared with the simulation in `hyperspace/tests/sim.rs`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyperspace::client::{ClientEvent, ClientOptions, Hyperspace};
use hyperspace::command::{ErrorCode, LockMode, event_mask, flags};
use hyperspace::launch::{GroupOptions, LocalGroup};
use parking_lot::Mutex;

#[path = "../../testsupport/lock_history.rs"]
mod lock_history;
use lock_history::{FinalState, Hold, WorkerLog};

/// A directory for the group: a fresh temporary one, or `$HT_TEST_KEEP_DIR/<name>` (kept, for
/// reading the replicas' logs after a failure).
fn test_dir(name: &str) -> (std::path::PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("HT_TEST_KEEP_DIR") {
        Some(base) => {
            let d = Path::new(&base).join(name);
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            (d, None)
        }
        None => {
            let t = tempfile::tempdir().unwrap();
            (t.path().to_path_buf(), Some(t))
        }
    }
}

fn ht() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ht"))
}

fn options(lease_ms: u64) -> ClientOptions {
    ClientOptions {
        lease: Duration::from_millis(lease_ms),
        grace: Duration::from_millis(lease_ms),
        request_timeout: Duration::from_secs(20),
        attempt_timeout: Duration::from_secs(2),
        ..Default::default()
    }
}

async fn connect(
    group: &LocalGroup,
    lease_ms: u64,
) -> (Hyperspace, tokio::sync::mpsc::Receiver<ClientEvent>) {
    Hyperspace::connect(
        group.addrs(),
        group.credentials().clone(),
        options(lease_ms),
    )
    .await
    .expect("open a session")
}

async fn worker(
    i: usize,
    hs: Hyperspace,
    mut events: tokio::sync::mpsc::Receiver<ClientEvent>,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<WorkerLog>>,
) {
    let expired = Arc::new(AtomicBool::new(false));
    let flag = expired.clone();
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            if e == ClientEvent::Expired {
                flag.store(true, Ordering::SeqCst);
            }
        }
    });
    let handle = hs
        .open("/test/lock", flags::READ | flags::LOCK, 0)
        .await
        .unwrap_or_else(|e| panic!("worker {i}: open: {e}"));
    let mut value = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let generation = match hs.lock(handle, LockMode::Exclusive).await {
            Ok(g) => g,
            Err(e) if e.code() == Some(ErrorCode::LockState) => {
                // An earlier lock whose answer was lost was granted after all.
                let _ = hs.release(handle).await;
                continue;
            }
            Err(e) => {
                eprintln!("worker {i}: lock: {e}");
                if e.code() == Some(ErrorCode::SessionExpired) {
                    expired.store(true, Ordering::SeqCst);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let granted = Instant::now();
        value += 1;
        log.lock().attempted_value = Some(value);
        match hs
            .attr_set("/test/data", &format!("w{i}"), value.to_string())
            .await
        {
            Ok(()) => log.lock().acked_value = Some(value),
            Err(e) => eprintln!("worker {i}: attr_set: {e}"),
        }
        match hs.attr_incr("/test/data", "total", 1).await {
            Ok(_) => log.lock().increments_acked += 1,
            Err(e) => {
                eprintln!("worker {i}: attr_incr: {e}");
                log.lock().increments_unknown += 1;
            }
        }
        let released = Instant::now();
        log.lock().holds.push(Hold {
            worker: i,
            generation,
            granted,
            released,
        });
        if let Err(e) = hs.release(handle).await {
            eprintln!("worker {i}: release: {e}");
        }
    }
    log.lock().expired = expired.load(Ordering::SeqCst);
    let _ = hs.close_session().await;
}

/// Kill -9 the leader repeatedly under load; check mutual exclusion, acknowledged writes,
/// session survival and the time to a new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_the_leader_repeatedly_under_lock_traffic() {
    let (dir, _tmp) = test_dir("kill");
    let mut group = LocalGroup::start(
        ht(),
        &dir,
        GroupOptions {
            snapshot_entries: 500,
            ..Default::default()
        },
    )
    .unwrap();
    group.leader(Duration::from_secs(20)).await.unwrap();
    let (admin, _ev) = connect(&group, 8000).await;
    admin.mkdir("/test").await.unwrap();
    let h = admin
        .open("/test/lock", flags::CREATE | flags::WRITE, 0)
        .await
        .unwrap();
    admin.close(h).await.unwrap();
    let h = admin
        .open("/test/data", flags::CREATE | flags::WRITE, 0)
        .await
        .unwrap();
    admin.close(h).await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let workers = 4;
    let mut logs = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..workers {
        let (hs, events) = connect(&group, 8000).await;
        let log = Arc::new(Mutex::new(WorkerLog::default()));
        logs.push(log.clone());
        tasks.push(tokio::spawn(worker(i, hs, events, stop.clone(), log)));
    }

    let mut failovers = Vec::new();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let old = group.leader(Duration::from_secs(10)).await.unwrap();
        group.kill(old);
        let killed = Instant::now();
        let new = group.leader(Duration::from_secs(10)).await.unwrap();
        // Served: a write goes through the new leader.
        admin.noop().await.unwrap();
        failovers.push((old, new, killed.elapsed()));
        tokio::time::sleep(Duration::from_millis(1000)).await;
        group.restart(old).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(2000)).await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("workers end")
            .unwrap();
    }

    for (old, new, took) in &failovers {
        eprintln!("leader {old} killed; leader {new} served after {took:?}");
        assert!(*took < Duration::from_secs(5), "failover took {took:?}");
    }
    // No two exclusive holders at once, acknowledged writes are there, sessions survived.
    let logs: Vec<WorkerLog> = logs.iter().map(|l| l.lock().clone()).collect();
    let mut values = Vec::new();
    for i in 0..workers {
        values.push(
            admin
                .attr_get("/test/data", &format!("w{i}"))
                .await
                .unwrap()
                .map(|v| String::from_utf8(v).unwrap().parse::<u64>().unwrap()),
        );
    }
    let total: u64 = String::from_utf8(
        admin
            .attr_get("/test/data", "total")
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap()
    .parse()
    .unwrap();
    let summary = lock_history::check(&logs, &FinalState { values, total }, 20)
        .unwrap_or_else(|e| panic!("lock history: {e}"));
    eprintln!("{} holds, counter {}", summary.holds, summary.total);
    admin.close_session().await.unwrap();
}

/// A leader cut off from the others serves no writes and no reads; the majority elects a new
/// leader and goes on; after healing, the old leader follows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_serves_nothing() {
    let (dir, _tmp) = test_dir("partition");
    let group = LocalGroup::start(ht(), &dir, GroupOptions::default()).unwrap();
    let old = group.leader(Duration::from_secs(20)).await.unwrap();
    let others: Vec<u64> = group
        .members()
        .keys()
        .copied()
        .filter(|&id| id != old)
        .collect();
    // A client that can reach only the old leader.
    let mut minority_opts = options(30_000);
    minority_opts.request_timeout = Duration::from_secs(4);
    let (minority, _e1) = Hyperspace::connect(
        vec![group.addr(old)],
        group.credentials().clone(),
        minority_opts,
    )
    .await
    .unwrap();
    minority.mkdir("/p").await.unwrap();

    group.isolate(old, others.clone()).await.unwrap();
    for &o in &others {
        group.isolate(o, vec![old]).await.unwrap();
    }
    let cut = Instant::now();
    // The majority side elects a new leader and takes writes (timed from the cut) ...
    let majority_addrs: Vec<_> = others.iter().map(|&id| group.addr(id)).collect();
    let creds = group.credentials().clone();
    let majority_task = tokio::spawn(async move {
        let (majority, _e2) = Hyperspace::connect(majority_addrs, creds, options(30_000))
            .await
            .unwrap();
        majority.attr_set("/p", "x", "majority").await.unwrap();
        (majority, cut.elapsed())
    });
    // ... while the isolated old leader acknowledges no write and serves no read.
    let write = minority.attr_set("/p", "x", "minority").await;
    assert!(write.is_err(), "the isolated leader acknowledged a write");
    let read = minority.exists("/p").await;
    assert!(
        read.is_err(),
        "the isolated leader served a linearizable read"
    );
    let (majority, took) = majority_task.await.unwrap();
    eprintln!("the majority took a write {took:?} after the cut");
    assert!(
        took < Duration::from_secs(5),
        "majority write took {took:?}"
    );

    for id in group.members().keys().copied() {
        group.isolate(id, vec![]).await.unwrap();
    }
    // The old leader now follows; its client is redirected and sees the majority's write.
    let mut got = None;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        if let Ok(v) = minority.attr_get("/p", "x").await {
            got = v;
            break;
        }
    }
    assert_eq!(got.as_deref(), Some(&b"majority"[..]));
    majority.close_session().await.unwrap();
}

/// Sessions and locks survive a leader change while keep-alives continue; an abandoned session
/// expires, releasing its lock (to a waiter) and deleting its ephemeral file; a replica that was
/// down catches up from a snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_failover_and_expire_when_abandoned() {
    let (dir, _tmp) = test_dir("sessions");
    let mut group = LocalGroup::start(
        ht(),
        &dir,
        GroupOptions {
            snapshot_entries: 100,
            ..Default::default()
        },
    )
    .unwrap();
    group.leader(Duration::from_secs(20)).await.unwrap();
    let (a, _ea) = connect(&group, 3000).await;
    let (b, mut eb) = connect(&group, 3000).await;
    a.mkdir("/s").await.unwrap();
    let ha = a
        .open("/s/lock", flags::CREATE | flags::LOCK | flags::WRITE, 0)
        .await
        .unwrap();
    let generation = a.lock(ha, LockMode::Exclusive).await.unwrap();
    let seq = a.sequencer(ha).await.unwrap();
    assert_eq!(seq.generation, generation);
    let eph = a
        .open(
            "/s/ephemeral",
            flags::CREATE | flags::TEMP | flags::WRITE,
            0,
        )
        .await
        .unwrap();
    assert!(eph > 0);

    // Leader change: a's session and lock live on.
    let old = group.leader(Duration::from_secs(10)).await.unwrap();
    group.kill(old);
    let killed = Instant::now();
    group.leader(Duration::from_secs(10)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(4000)).await; // longer than the lease
    assert!(killed.elapsed() > Duration::from_secs(3));
    assert_ne!(a.state(), hyperspace::client::SessionState::Expired);
    assert!(b.check_sequencer(seq.clone()).await.unwrap());
    let hb = b
        .open("/s/lock", flags::LOCK | flags::READ, 0)
        .await
        .unwrap();
    assert_eq!(b.try_lock(hb, LockMode::Exclusive).await.unwrap(), None);
    let dir_handle = b
        .open("/s", flags::READ, event_mask::CHILD_NODE_REMOVED)
        .await
        .unwrap();

    // While the old leader is down, enough entries that it must catch up from a snapshot.
    for _ in 0..150 {
        b.noop().await.unwrap();
    }
    group.restart(old).unwrap();

    // a crashes (stops its keep-alives): its session expires, b's blocking lock is granted and
    // the ephemeral file goes.
    a.abandon();
    let abandoned = Instant::now();
    let g2 = tokio::time::timeout(Duration::from_secs(15), b.lock(hb, LockMode::Exclusive))
        .await
        .expect("the lock passes to b after a's session expires")
        .unwrap();
    eprintln!("lock passed after {:?}", abandoned.elapsed());
    assert!(g2 > generation);
    assert!(!b.check_sequencer(seq).await.unwrap());
    assert!(!b.exists("/s/ephemeral").await.unwrap());
    let mut saw_removed = false;
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_secs(2), eb.recv()).await {
        if let ClientEvent::Node(ev) = e
            && ev.handle == dir_handle
            && ev.kind == event_mask::CHILD_NODE_REMOVED
            && ev.name == "ephemeral"
        {
            saw_removed = true;
            break;
        }
    }
    assert!(
        saw_removed,
        "no CHILD_NODE_REMOVED event for the ephemeral file"
    );

    // The restarted replica caught up, from a snapshot.
    let leader = group.leader(Duration::from_secs(10)).await.unwrap();
    let commit = group.status(leader).await.unwrap().commit;
    let start = Instant::now();
    loop {
        let st = group.status(old).await;
        if let Ok(st) = &st
            && st.applied >= commit
        {
            assert!(
                st.snapshots_installed >= 1,
                "caught up without a snapshot: {st:?}"
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "replica {old} did not catch up: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.close_session().await.unwrap();
}

/// A fourth replica joins through a Raft configuration change, catches up and counts in the
/// quorum; then it is removed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_change_adds_and_removes_a_replica() {
    let (dir, _tmp) = test_dir("membership");
    let mut group = LocalGroup::start(ht(), &dir, GroupOptions::default()).unwrap();
    group.leader(Duration::from_secs(20)).await.unwrap();
    let (hs, _e) = connect(&group, 8000).await;
    hs.mkdir("/m").await.unwrap();
    for i in 0..20 {
        hs.attr_set("/m", "i", i.to_string()).await.unwrap();
    }
    let founders = group.addrs();
    let addr4 = hyperspace::launch::free_addr().unwrap().to_string();
    group.spawn_joiner(4, addr4.clone()).unwrap();
    hyperspace::launch::change_member(
        &founders,
        group.server_credentials(),
        true,
        4,
        &addr4,
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    hs.attr_set("/m", "after", "join").await.unwrap();
    let leader = group.leader(Duration::from_secs(10)).await.unwrap();
    let commit = group.status(leader).await.unwrap().commit;
    let start = Instant::now();
    loop {
        if let Ok(st) = group.status(4).await
            && st.applied >= commit
        {
            assert_eq!(st.members.len(), 4, "{st:?}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the new replica did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // With four voters, two replicas down would stop writes; one down must not.
    let follower = group
        .members()
        .keys()
        .copied()
        .find(|&id| id != leader && id != 4)
        .unwrap();
    group.kill(follower);
    hs.attr_set("/m", "with", "one down").await.unwrap();
    group.restart(follower).unwrap();
    hyperspace::launch::change_member(
        &founders,
        group.server_credentials(),
        false,
        4,
        &addr4,
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    let leader = group.leader(Duration::from_secs(10)).await.unwrap();
    let st = group.status(leader).await.unwrap();
    assert_eq!(st.members.len(), 3, "{st:?}");
    assert!(!st.members.contains_key(&4));
    group.kill(4);
    hs.attr_set("/m", "after", "removal").await.unwrap();
    assert_eq!(
        hs.attr_get("/m", "with").await.unwrap().as_deref(),
        Some(&b"one down"[..])
    );
    hs.close_session().await.unwrap();
}

/// The `ht hyperspace` shell on an embedded single replica.
#[test]
fn shell_on_an_embedded_replica() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(ht())
        .args(["hyperspace", "--embedded", "--data-dir"])
        .arg(dir.path())
        .args([
            "-e",
            "mkdir /a; mkdir -p /a/b/c; create /a/f; ls /a; attr set /a/f k hello world; \
             attr get /a/f k; attr incr /a/f n 5; attr incr /a/f n; attr list /a/f; \
             open /a/f lock; lock 2; sequencer 2; unlock 2; exists /a/b/c; rm /a/b/c; exists /a/b/c; status",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected_start = "b/\nf\nhello world\n5\n6\nk\nn\nhandle 2\ngranted, generation ";
    assert!(stdout.starts_with(expected_start), "{stdout}");
    assert!(stdout.contains("/a/f Exclusive generation"), "{stdout}");
    assert!(
        stdout.contains("\ntrue\nfalse\nreplica 1 role Leader"),
        "{stdout}"
    );
    // The data is still there for the next process; an error ends a -e run with status 1.
    let out = std::process::Command::new(ht())
        .args(["hyperspace", "--embedded", "--data-dir"])
        .arg(dir.path())
        .args(["-e", "attr get /a/f k; rm /nonexistent"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        stdout.starts_with("hello world\nerror: hyperspace delete: NotFound"),
        "{stdout}"
    );
}

/// With every replica gone, a client reports jeopardy when its lease runs out and expiry after
/// the grace period; its blocked requests fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_reports_jeopardy_then_expiry() {
    let (dir, _tmp) = test_dir("jeopardy");
    let mut group = LocalGroup::start(ht(), &dir, GroupOptions::default()).unwrap();
    group.leader(Duration::from_secs(20)).await.unwrap();
    let mut opts = options(2000);
    opts.grace = Duration::from_secs(2);
    let (hs, mut events) = Hyperspace::connect(group.addrs(), group.credentials().clone(), opts)
        .await
        .unwrap();
    hs.mkdir("/j").await.unwrap();
    group.stop();
    let stopped = Instant::now();
    let mut seen = Vec::new();
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
        seen.push((e.clone(), stopped.elapsed()));
        if e == ClientEvent::Expired {
            break;
        }
    }
    eprintln!("{seen:?}");
    assert_eq!(
        seen.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(),
        vec![ClientEvent::Jeopardy, ClientEvent::Expired]
    );
    assert!(
        seen[0].1 <= Duration::from_secs(4),
        "jeopardy late: {seen:?}"
    );
    assert!(
        seen[1].1 >= Duration::from_secs(2),
        "expired early: {seen:?}"
    );
    assert_eq!(hs.state(), hyperspace::client::SessionState::Expired);
    assert!(matches!(
        hs.mkdir("/k").await,
        Err(hyperspace::client::ClientError::SessionExpired(_))
    ));
}
