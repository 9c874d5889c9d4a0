//! Runs the `Fs` conformance suite against `LocalFs` and against `FaultFs` over `LocalFs` with
//! no rules (which must be transparent).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dfs_broker::{FaultFs, Fs, LocalFs};

/// A factory of empty `LocalFs`es in subdirectories of one temporary directory, removed when
/// the factory is dropped.
fn local_factory() -> impl Fn() -> Arc<dyn Fs> {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = AtomicU64::new(0);
    move || -> Arc<dyn Fs> {
        let sub = dir
            .path()
            .join(n.fetch_add(1, Ordering::Relaxed).to_string());
        Arc::new(LocalFs::new(sub).expect("LocalFs::new"))
    }
}

fn fault_factory() -> impl Fn() -> Arc<dyn Fs> {
    let local = local_factory();
    move || -> Arc<dyn Fs> { FaultFs::new(local()) }
}

mod local {
    dfs_broker::conformance_tests!(super::local_factory());
}

mod fault_over_local {
    dfs_broker::conformance_tests!(super::fault_factory());
}

/// `run_all` itself, as other backends' tests will call it.
#[tokio::test(flavor = "multi_thread")]
async fn run_all_local() {
    let make = local_factory();
    dfs_broker::conformance::run_all(&make).await;
}
