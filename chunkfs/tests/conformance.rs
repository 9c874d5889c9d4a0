//! The `Fs` conformance suite on each flavour, against in-process servers on loopback: small
//! blocks (256 KiB) so that the large-file checks span many blocks.

use std::sync::Arc;

use chunkfs::launch::{InProcessDfs, LocalDfsOptions};
use chunkfs::{Flavour, Layout};
use dfs_broker::Fs;
use parking_lot::Mutex;

/// A factory of fresh clusters; every cluster it starts lives as long as the factory.
fn factory(options: LocalDfsOptions) -> impl Fn() -> Arc<dyn Fs> {
    let keep: Arc<Mutex<Vec<InProcessDfs>>> = Arc::default();
    move || {
        let options = options.clone();
        let (dfs, fs) = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(InProcessDfs::start(options))
        })
        .expect("start an in-process chunkfs");
        keep.lock().push(dfs);
        Arc::new(fs)
    }
}

fn small(mut o: LocalDfsOptions) -> LocalDfsOptions {
    o.block_bytes = 256 << 10;
    o.heartbeat_ms = 100;
    o
}

mod hdfs_like {
    use super::*;
    dfs_broker::conformance_tests!(factory(small(LocalDfsOptions::hdfs_like())));
}

mod kfs_like_replicated {
    use super::*;
    dfs_broker::conformance_tests!(factory(small(LocalDfsOptions::kfs_like())));
}

mod kfs_like_reed_solomon {
    use super::*;
    dfs_broker::conformance_tests!(factory(small(LocalDfsOptions {
        flavour: Flavour::KfsLike,
        layout: Layout::Striped {
            data: 6,
            parity: 3,
            cell_bytes: 16 << 10,
        },
        chunk_servers: 9,
        ..LocalDfsOptions::kfs_like()
    })));
}
