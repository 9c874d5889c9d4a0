//! `ht cingest agitate`: every `kill_every`, kills one process of a local cluster with
//! SIGKILL (a random range server, the active master or the Hyperspace leader, the kind chosen
//! at random), waits `restart_after`, and starts it again with the arguments `ht start` gave it
//! (recorded in `cluster.json`): a range server comes back as a new incarnation, a master as a
//! standby, a Hyperspace replica with its state. The new pid replaces the old in `cluster.json`,
//! so `ht stop` stops it. Accumulo's agitator does the same to tablet servers and masters.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use client::cluster::ClusterClient;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::Stop;
use crate::cluster_cmd::{ClusterFile, Proc, alive, signal, spawn};

/// What the agitator kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// A random live range server.
    Rangeserver,
    /// The active master.
    Master,
    /// The Hyperspace leader.
    Hyperspace,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Rangeserver, Kind::Master, Kind::Hyperspace];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Rangeserver => "rangeserver",
            Kind::Master => "master",
            Kind::Hyperspace => "hyperspace",
        }
    }
}

/// How the agitator works.
#[derive(Debug, Clone)]
pub struct AgitateConfig {
    pub kill_every: Duration,
    pub restart_after: Duration,
    pub kinds: Vec<Kind>,
    /// Never kill the range server holding METADATA (the ROOT range).
    pub spare_root: bool,
    pub seed: u64,
}

/// Kills made, by kind.
#[derive(Debug, Default)]
pub struct Kills {
    by_kind: [AtomicU64; 3],
}

impl Kills {
    fn add(&self, kind: Kind) {
        self.by_kind[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn of(&self, kind: Kind) -> u64 {
        self.by_kind[kind as usize].load(Ordering::Relaxed)
    }

    pub fn total(&self) -> u64 {
        Kind::ALL.iter().map(|k| self.of(*k)).sum()
    }

    /// `rangeserver=N master=N hyperspace=N`.
    pub fn summary(&self) -> String {
        Kind::ALL
            .iter()
            .map(|k| format!("{}={}", k.name(), self.of(*k)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Kills and restarts processes of the cluster in `dir` until `stop`.
pub fn agitate(
    dir: &Path,
    client: &ClusterClient,
    cfg: &AgitateConfig,
    stop: &Stop,
    kills: &Kills,
) -> anyhow::Result<()> {
    if cfg.kinds.is_empty() {
        bail!("the agitator has nothing to kill (--kill lists no kind)");
    }
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    while !stop.sleep(cfg.kill_every) {
        let mut kinds = cfg.kinds.clone();
        kinds.shuffle(&mut rng);
        let mut killed = false;
        for kind in kinds {
            if let Some(p) = victim(dir, client, kind, cfg.spare_root, &mut rng)? {
                kill_and_restart(dir, &p, kind, cfg.restart_after)?;
                kills.add(kind);
                killed = true;
                break;
            }
        }
        if !killed {
            eprintln!("cingest agitate: found nothing to kill this round");
        }
    }
    Ok(())
}

/// The process to kill of `kind`, if it can be found now.
fn victim(
    dir: &Path,
    client: &ClusterClient,
    kind: Kind,
    spare_root: bool,
    rng: &mut StdRng,
) -> anyhow::Result<Option<Proc>> {
    let procs: Vec<Proc> = ClusterFile::read(dir)?
        .processes
        .into_iter()
        .filter(|p| alive(p.pid))
        .collect();
    Ok(match kind {
        Kind::Rangeserver => {
            let spared = if spare_root {
                match client.master_status() {
                    Ok(st) => Some(st.root_location),
                    Err(e) => {
                        eprintln!("cingest agitate: cannot tell which server holds METADATA: {e}");
                        return Ok(None);
                    }
                }
            } else {
                None
            };
            let rs: Vec<&Proc> = procs
                .iter()
                .filter(|p| p.role == "rangeserver")
                .filter(|p| spared.is_none() || location_of(p) != spared)
                .collect();
            if rs.is_empty() {
                None
            } else {
                Some(rs[rng.random_range(0..rs.len())].clone())
            }
        }
        Kind::Master => match client.master_status() {
            Ok(st) => procs
                .into_iter()
                .find(|p| p.role == "master" && p.pid == st.pid),
            Err(e) => {
                eprintln!("cingest agitate: no active master to kill: {e}");
                None
            }
        },
        Kind::Hyperspace => match client.hyperspace_status() {
            Ok(st) => {
                let name = format!("hyperspace-{}", st.leader_id);
                procs
                    .into_iter()
                    .find(|p| p.role == "hyperspace" && p.name == name)
            }
            Err(e) => {
                eprintln!("cingest agitate: no Hyperspace leader to kill: {e}");
                None
            }
        },
    })
}

/// The location (`rs<N>`) the range-server process `p` registered as: the last one its log
/// names (a restarted process appends to the log of the one it replaces).
fn location_of(p: &Proc) -> Option<String> {
    let log = std::fs::read_to_string(&p.log).ok()?;
    log.lines().rev().find_map(|l| {
        let rest = l.strip_prefix("range server ")?;
        let (loc, tail) = rest.split_once(' ')?;
        tail.starts_with("serving on").then(|| loc.to_string())
    })
}

fn kill_and_restart(
    dir: &Path,
    p: &Proc,
    kind: Kind,
    restart_after: Duration,
) -> anyhow::Result<()> {
    if p.args.is_empty() {
        bail!(
            "cannot restart {}: {} records no arguments for it (the cluster was started by an \
             older ht; restart it with ht stop and ht start)",
            p.name,
            dir.join(crate::cluster_cmd::CLUSTER_FILE).display()
        );
    }
    signal(p.pid, libc::SIGKILL);
    let killed_at = Instant::now();
    while alive(p.pid) {
        if killed_at.elapsed() > Duration::from_secs(10) {
            bail!("{} (pid {}) still runs 10 s after SIGKILL", p.name, p.pid);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(restart_after);
    let new = spawn(dir, &p.role, &p.name, &p.args)
        .with_context(|| format!("cannot restart {}", p.name))?;
    let mut file = ClusterFile::read(dir)?;
    for q in file.processes.iter_mut() {
        if q.name == p.name {
            *q = new.clone();
        }
    }
    file.write(dir)?;
    eprintln!(
        "cingest agitate: killed {} ({}, pid {}) with SIGKILL; restarted as pid {} after {} ms",
        p.name,
        kind.name(),
        p.pid,
        new.pid,
        restart_after.as_millis()
    );
    Ok(())
}
