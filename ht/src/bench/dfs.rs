//! `ht bench dfs`: BENCH.md section 3, the DFS backend comparison. Concurrent loaders (threads,
//! each its own query log) LOAD DATA INFILE into one table of an embedded database whose engine
//! writes through each backend in turn, with the commit log not flushed (durability `log`) and
//! flushed (`flush`). One row per backend and mode in the form of Hypertable's load report, the
//! ratio to `local`, and an SVG chart.
//!
//! Backends: `local` (the data directory), `broker` (a DFS broker over QUIC on loopback in front
//! of a local directory), `objstore` (a moto S3 server on loopback), and ht's own chunkfs as
//! processes on loopback (`chunkfs::launch::LocalDfs`): `hdfs-like` (3 chunk servers, pipeline
//! of 3), `kfs-like` (3 chunk servers, 3 replicas written in parallel) and `kfs-like-rs` (9 chunk
//! servers, Reed-Solomon 6+3).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use client::{Client, TableSchema};
use common::schema::Durability;
use dfs_broker::broker::{BrokerFs, BrokerFsOptions, BrokerOptions, BrokerService};
use dfs_broker::objstore::s3_server::S3TestServer;
use embedded::{EmbeddedClient, EmbeddedOptions, FsFactory};
use hql::load::LoadReport;
use rpc::ClusterCredentials;

use super::load::{FAMILIES, TABLE};

#[derive(Args, Debug)]
pub struct DfsBenchArgs {
    /// Lines of query log per loader.
    #[arg(long, default_value_t = 250_000)]
    lines: u64,
    /// Concurrent loaders.
    #[arg(long, default_value_t = 4)]
    loaders: usize,
    /// Backends to measure, comma-separated: local, broker, objstore, hdfs-like, kfs-like,
    /// kfs-like-rs.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "local,broker,objstore,hdfs-like,kfs-like,kfs-like-rs"
    )]
    backends: Vec<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the data goes; default a temporary directory in /tmp.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Where the chart goes.
    #[arg(long, default_value = "bench/dfs.svg")]
    chart: PathBuf,
}

/// One backend and mode's figures.
struct Row {
    backend: String,
    flush: bool,
    elapsed_s: f64,
    cells: u64,
    key_bytes: u64,
    value_bytes: u64,
    per_loader: Vec<f64>,
}

impl Row {
    fn inserts_per_sec(&self) -> f64 {
        self.cells as f64 / self.elapsed_s
    }
}

/// What the backends need for the whole run: a broker, an S3 server, chunkfs clusters.
struct Backends {
    rt: tokio::runtime::Runtime,
    broker: Option<(rpc::Server, std::net::SocketAddr, ClusterCredentials)>,
    s3: Option<S3TestServer>,
    chunkfs: Vec<(String, chunkfs::launch::LocalDfs)>,
}

impl Backends {
    fn start(base: &Path, names: &[String]) -> anyhow::Result<Backends> {
        let rt = tokio::runtime::Runtime::new()?;
        let broker = if names.iter().any(|n| n == "broker") {
            let certs = base.join("certs");
            ClusterCredentials::create(&certs)?;
            for name in ["dfs-broker", "client"] {
                ClusterCredentials::issue(&certs, name)?;
            }
            let backend_dir = base.join("broker-backend");
            std::fs::create_dir_all(&backend_dir)?;
            let server = rt.block_on(async {
                let backend = Arc::new(dfs_broker::LocalFs::new(&backend_dir)?);
                let creds = ClusterCredentials::load(&certs, "dfs-broker")?;
                let server = BrokerService::new(
                    backend as Arc<dyn dfs_broker::Fs>,
                    BrokerOptions::default(),
                )
                .bind("127.0.0.1:0".parse()?, &creds)?;
                anyhow::Ok(server)
            })?;
            let addr = server.local_addr();
            Some((server, addr, ClusterCredentials::load(&certs, "client")?))
        } else {
            None
        };
        let s3 = if names.iter().any(|n| n == "objstore") {
            Some(S3TestServer::start("ht-bench").map_err(anyhow::Error::msg)?)
        } else {
            None
        };
        let mut chunkfs = Vec::new();
        for name in names {
            use chunkfs::launch::{LocalDfs, LocalDfsOptions};
            let options = match name.as_str() {
                "hdfs-like" => LocalDfsOptions::hdfs_like(),
                "kfs-like" => LocalDfsOptions::kfs_like(),
                "kfs-like-rs" => LocalDfsOptions::kfs_like_rs(),
                _ => continue,
            };
            let ht = std::env::current_exe().context("where is the ht binary")?;
            let dfs = LocalDfs::start(&ht, &base.join(name), options)
                .with_context(|| format!("starting {name}"))?;
            rt.block_on(dfs.connect(std::time::Duration::from_secs(30)))
                .with_context(|| format!("{name} did not come up"))?;
            chunkfs.push((name.clone(), dfs));
        }
        Ok(Backends {
            rt,
            broker,
            s3,
            chunkfs,
        })
    }

    /// The embedded database's options for one run on `backend`.
    fn options(&self, backend: &str, run: usize) -> anyhow::Result<EmbeddedOptions> {
        let storage =
            |e: dfs_broker::FsError| client::ClientError::storage(e.kind(), e.to_string());
        let fs: Option<FsFactory> = match backend {
            "local" => None,
            "broker" => {
                let (_, addr, creds) = self.broker.as_ref().context("no broker")?;
                let (addr, creds) = (*addr, creds.clone());
                // Each run under its own directory of the broker's backend.
                let root = format!("/run{run}");
                Some(Arc::new(move |h: &tokio::runtime::Handle| {
                    let fs = h
                        .block_on(BrokerFs::connect(addr, &creds, BrokerFsOptions::default()))
                        .map_err(storage)?;
                    let fs: Arc<dyn dfs_broker::Fs> = Arc::new(fs);
                    Ok(Arc::new(Rooted {
                        fs,
                        root: root.clone(),
                    }) as Arc<dyn dfs_broker::Fs>)
                }))
            }
            "objstore" => {
                let fs = self
                    .s3
                    .as_ref()
                    .context("no S3 server")?
                    .fs(&format!("run{run}"))?;
                let fs: Arc<dyn dfs_broker::Fs> = Arc::new(fs);
                Some(Arc::new(move |_: &tokio::runtime::Handle| Ok(fs.clone())))
            }
            name if self.chunkfs.iter().any(|(n, _)| n == name) => {
                let (_, dfs) = self
                    .chunkfs
                    .iter()
                    .find(|(n, _)| n == name)
                    .expect("checked");
                let (meta, creds) = (dfs.meta_addr(), dfs.credentials().clone());
                let root = format!("/run{run}");
                Some(Arc::new(move |h: &tokio::runtime::Handle| {
                    let fs = h
                        .block_on(chunkfs::launch::connect_ready(
                            meta,
                            &creds,
                            1,
                            std::time::Duration::from_secs(30),
                        ))
                        .map_err(storage)?;
                    let fs: Arc<dyn dfs_broker::Fs> = Arc::new(fs);
                    Ok(Arc::new(Rooted {
                        fs,
                        root: root.clone(),
                    }) as Arc<dyn dfs_broker::Fs>)
                }))
            }
            other => bail!(
                "unknown backend {other:?} (built: local, broker, objstore, hdfs-like, kfs-like, kfs-like-rs)"
            ),
        };
        Ok(EmbeddedOptions {
            fs,
            ..Default::default()
        })
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        if let Some((server, _, _)) = self.broker.take() {
            self.rt
                .block_on(server.shutdown(std::time::Duration::from_millis(200)));
        }
    }
}

/// A file system seen under a directory of another (so runs on one broker do not share files).
struct Rooted {
    fs: Arc<dyn dfs_broker::Fs>,
    root: String,
}

impl Rooted {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.root)
    }
}

#[async_trait::async_trait]
impl dfs_broker::Fs for Rooted {
    async fn create(
        &self,
        path: &str,
        overwrite: bool,
    ) -> dfs_broker::FsResult<Box<dyn dfs_broker::FsWriter>> {
        self.fs.create(&self.at(path), overwrite).await
    }
    async fn open(&self, path: &str) -> dfs_broker::FsResult<Arc<dyn dfs_broker::FsReader>> {
        self.fs.open(&self.at(path)).await
    }
    async fn length(&self, path: &str) -> dfs_broker::FsResult<u64> {
        self.fs.length(&self.at(path)).await
    }
    async fn remove(&self, path: &str) -> dfs_broker::FsResult<()> {
        self.fs.remove(&self.at(path)).await
    }
    async fn rmdir(&self, path: &str, recursive: bool) -> dfs_broker::FsResult<()> {
        self.fs.rmdir(&self.at(path), recursive).await
    }
    async fn rename(&self, from: &str, to: &str) -> dfs_broker::FsResult<()> {
        self.fs.rename(&self.at(from), &self.at(to)).await
    }
    async fn mkdirs(&self, path: &str) -> dfs_broker::FsResult<()> {
        self.fs.mkdirs(&self.at(path)).await
    }
    async fn readdir(&self, path: &str) -> dfs_broker::FsResult<Vec<dfs_broker::DirEntry>> {
        self.fs.readdir(&self.at(path)).await
    }
    async fn exists(&self, path: &str) -> dfs_broker::FsResult<bool> {
        self.fs.exists(&self.at(path)).await
    }
    fn url(&self) -> String {
        format!("{}{}", self.fs.url(), self.root)
    }
}

fn load_run(
    dir: &Path,
    options: EmbeddedOptions,
    files: &[PathBuf],
    flush: bool,
) -> anyhow::Result<(f64, Vec<LoadReport>)> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let client = EmbeddedClient::open(dir, options)?;
    let mut schema = TableSchema::new(0, "");
    for f in FAMILIES {
        schema.add_family(f);
    }
    schema.durability = if flush {
        Durability::Flush
    } else {
        Durability::Log
    };
    client.create_table(TABLE, schema)?;
    let (elapsed, reports) = super::load::parallel_load(&client, files)?;
    client.close()?;
    Ok((elapsed, reports))
}

pub fn run(args: DfsBenchArgs) -> anyhow::Result<()> {
    if args.loaders == 0 || args.lines == 0 {
        bail!("--loaders and --lines must be at least 1");
    }
    let (base, _tmp) = super::work_dir(&args.dir, "ht-bench-dfs-")?;
    std::fs::create_dir_all(&base)?;
    let mut files = Vec::new();
    for i in 0..args.loaders {
        let p = base.join(format!("query-log-{i}.tsv"));
        let mut w = std::io::BufWriter::new(std::fs::File::create(&p)?);
        super::querylog::generate(args.lines, args.seed + i as u64, &mut w)?;
        std::io::Write::flush(&mut w)?;
        files.push(p);
    }
    let backends = Backends::start(&base, &args.backends)?;
    let mut rows = Vec::new();
    let mut run = 0;
    for backend in &args.backends {
        for flush in [false, true] {
            run += 1;
            let options = backends.options(backend, run)?;
            let (elapsed_s, reports) =
                load_run(&base.join(format!("db{run}")), options, &files, flush)
                    .with_context(|| format!("loading on {backend}"))?;
            let row = Row {
                backend: backend.clone(),
                flush,
                elapsed_s,
                cells: reports.iter().map(|r| r.cells).sum(),
                key_bytes: reports.iter().map(|r| r.key_bytes).sum(),
                value_bytes: reports.iter().map(|r| r.value_bytes).sum(),
                per_loader: reports.iter().map(|r| r.cells_per_sec()).collect(),
            };
            eprintln!(
                "{backend} flush {}: {:.0} inserts/s",
                if flush { "on" } else { "off" },
                row.inserts_per_sec()
            );
            rows.push(row);
        }
    }
    println!(
        "| backend | commit-log flush | elapsed s | avg key B | avg value B | bytes/s | inserts/s per loader | inserts/s total | ratio to local |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut figures = Vec::new();
    for r in &rows {
        let local = rows
            .iter()
            .find(|l| l.backend == "local" && l.flush == r.flush)
            .map(|l| r.inserts_per_sec() / l.inserts_per_sec());
        let per_loader = r.per_loader.iter().sum::<f64>() / r.per_loader.len() as f64;
        let bytes = (r.key_bytes + r.value_bytes) as f64 / r.elapsed_s;
        let ratio = local.map_or("-".to_string(), |x| format!("{x:.2}"));
        let mode = if r.flush { "on" } else { "off" };
        println!(
            "| {} | {mode} | {:.2} | {:.2} | {:.2} | {bytes:.0} | {per_loader:.0} | {:.0} | {ratio} |",
            r.backend,
            r.elapsed_s,
            r.key_bytes as f64 / r.cells as f64,
            r.value_bytes as f64 / r.cells as f64,
            r.inserts_per_sec(),
        );
        figures.push(format!(
            "{} flush {mode}: {:.2} s, {:.0} inserts/s ({per_loader:.0}/loader), ratio {ratio}",
            r.backend,
            r.elapsed_s,
            r.inserts_per_sec()
        ));
    }
    write_chart(&args.chart, &rows)?;
    let line = format!(
        "| {} | {} | {} | `{}` | dfs, {} loaders x {} lines: {} |",
        super::utc_now(),
        super::git_commit(),
        super::machine(),
        super::command_line(),
        args.loaders,
        args.lines,
        figures.join("; ")
    );
    let path = super::append_result(&line)?;
    println!(
        "(chart {}; appended to {})",
        args.chart.display(),
        path.display()
    );
    Ok(())
}

/// A bar chart of total inserts/s per backend, flush off and on side by side.
fn write_chart(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    let max = rows.iter().map(Row::inserts_per_sec).fold(1.0f64, f64::max);
    let (w, h, top, bottom, left) = (640.0, 360.0, 40.0, 60.0, 70.0);
    let plot_h = h - top - bottom;
    let bar_w = 36.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <text x=\"{left}\" y=\"20\" font-size=\"14\">ht bench dfs: total inserts/s (light: commit-log flush off, dark: on)</text>\n\
         <line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
        h - bottom,
        w - 20.0,
        h - bottom
    );
    for i in 0..=4 {
        let v = max * i as f64 / 4.0;
        let y = h - bottom - plot_h * i as f64 / 4.0;
        svg += &format!(
            "<text x=\"{}\" y=\"{y}\" text-anchor=\"end\">{:.0}k</text>\n",
            left - 6.0,
            v / 1000.0
        );
    }
    let backends: Vec<&str> = rows.iter().fold(Vec::new(), |mut v, r| {
        if !v.contains(&r.backend.as_str()) {
            v.push(r.backend.as_str());
        }
        v
    });
    for (i, b) in backends.iter().enumerate() {
        let x0 = left + 30.0 + i as f64 * (2.0 * bar_w + 50.0);
        for r in rows.iter().filter(|r| r.backend == *b) {
            let x = x0 + if r.flush { bar_w } else { 0.0 };
            let bh = plot_h * r.inserts_per_sec() / max;
            let fill = if r.flush { "#2b6cb0" } else { "#90cdf4" };
            svg += &format!(
                "<rect x=\"{x}\" y=\"{}\" width=\"{}\" height=\"{bh}\" fill=\"{fill}\"/>\n",
                h - bottom - bh,
                bar_w - 4.0
            );
        }
        svg += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{b}</text>\n",
            x0 + bar_w,
            h - bottom + 18.0
        );
    }
    svg += "</svg>\n";
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, svg)?;
    Ok(())
}
