//! A profiling harness: `fill DIR N` writes N cells with 8-byte random keys (like `ht bench
//! engine`'s fillrandom), `fillseq DIR N` with sequential keys, `scan DIR R` runs R full scans, `get DIR N` runs N
//! one-row scans. Run under `perf record` to see where reads spend their time.

use std::sync::Arc;
use std::time::Instant;

use common::TableSchema;
use common::scan_spec::RowInterval;
use dfs_broker::LocalFs;
use rangeserver::engine::{Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::ScanSpec;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (mode, dir, n) = match args.as_slice() {
        [_, m, d, n] => (m.as_str(), d.as_str(), n.parse::<u64>()?),
        _ => return Err("usage: scan_profile fill|scan|get DIR N".into()),
    };
    let rt = tokio::runtime::Runtime::new()?;
    let e = Engine::open(
        Arc::new(LocalFs::new(dir)?),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )?;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let start = Instant::now();
    match mode {
        "fill" | "fillseq" => {
            let mut s = TableSchema::new(1, "/p");
            s.add_family("v");
            s.families[0].max_versions = 1;
            e.create_table(s)?;
            let mut batch = Vec::with_capacity(1000);
            for i in 0..n {
                let k = if mode == "fill" { rnd(n) } else { i };
                batch.push(Mutation::insert(
                    k.to_be_bytes().to_vec(),
                    1,
                    Vec::new(),
                    format!("{i:016}"),
                ));
                if batch.len() == 1000 {
                    e.apply(1, &batch)?;
                    batch.clear();
                }
            }
            e.apply(1, &batch)?;
            e.wait_for_maintenance();
        }
        "scan" => {
            let mut cells = 0;
            for _ in 0..n {
                cells += e.scan(1, &ScanSpec::default())?.for_each_raw(|_, _| {})?;
            }
            println!("{cells} cells");
        }
        "get" => {
            let total = e.stats();
            let mut found = 0;
            let keyspace = 1_000_000;
            for _ in 0..n {
                let spec = ScanSpec {
                    row_intervals: vec![RowInterval::row(rnd(keyspace).to_be_bytes().to_vec())],
                    ..Default::default()
                };
                found += e.scan(1, &spec)?.for_each_raw(|_, _| {})?;
            }
            println!("{found} found ({} stores)", total.stores);
        }
        _ => return Err("mode is fill, scan or get".into()),
    }
    println!("{mode}: {:.2} s", start.elapsed().as_secs_f64());
    e.close()?;
    Ok(())
}
