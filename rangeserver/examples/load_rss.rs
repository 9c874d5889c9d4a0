//! Loads N cells (8-byte random keys, 16-byte values, batches of 1000) into an engine with the
//! default 256 MiB cell-cache limit and prints the rate and the peak RSS, for the memory
//! bound (20 million cells under 1 GiB RSS).
//!
//! `cargo run --release -p rangeserver --example load_rss -- [N] [DIR]`

use std::sync::Arc;
use std::time::Instant;

use common::TableSchema;
use dfs_broker::LocalFs;
use rangeserver::engine::{Engine, EngineOptions, Mutation};

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20_000_000);
    let dir = match args.get(2) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("ht-load-rss-{}", std::process::id())),
    };
    let rt = tokio::runtime::Runtime::new()?;
    let fs = Arc::new(LocalFs::new(&dir)?);
    let opts = EngineOptions::default();
    println!(
        "cell cache limit {} MiB, dir {}",
        opts.cell_cache_limit_bytes >> 20,
        dir.display()
    );
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone())?;
    let mut s = TableSchema::new(1, "/load");
    s.add_family("v");
    e.create_table(s)?;
    let start = Instant::now();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut batch = Vec::with_capacity(1000);
    for i in 0..n {
        // xorshift: deterministic random keys.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let row = (x % (n * 4)).to_be_bytes().to_vec();
        batch.push(Mutation::insert(row, 1, Vec::new(), format!("{i:016}")));
        if batch.len() == 1000 {
            e.apply(1, &batch)?;
            batch.clear();
        }
    }
    e.apply(1, &batch)?;
    let load_s = start.elapsed().as_secs_f64();
    e.wait_for_maintenance();
    let st = e.stats();
    println!(
        "loaded {n} cells in {load_s:.1} s ({:.0} cells/s); ranges {}, stores {}, minor {}, merging {}, major {}, splits {}",
        n as f64 / load_s,
        st.ranges,
        st.stores,
        st.minor_compactions,
        st.merging_compactions,
        st.major_compactions,
        st.splits
    );
    println!("peak RSS {} MiB", peak_rss_kib() / 1024);
    e.close()?;
    if args.get(2).is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
