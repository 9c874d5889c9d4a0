//! The tick loop: marks silent chunk servers dead, hands expired leases to recovery, and picks
//! and runs repairs (a copy from a replica, or a Reed-Solomon rebuild) of under-replicated chunks.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tracing::{info, warn};

use super::Shared;
use super::lease::{expired_leases, recover_lease};
use crate::messages::*;
use crate::{Layout, rs};

pub(super) async fn tick_loop(shared: Arc<Shared>) {
    let period = Duration::from_millis(shared.options.tick_ms.max(10));
    loop {
        tokio::time::sleep(period).await;
        for file_id in expired_leases(&shared) {
            let shared = shared.clone();
            tokio::spawn(async move { recover_lease(&shared, file_id).await });
        }
        let jobs = tick(&shared);
        for (chunk, target, job) in jobs {
            let shared = shared.clone();
            tokio::spawn(async move {
                let result = repair(&shared, chunk, &target, job).await;
                let mut st = shared.state.lock();
                st.repairs.remove(&chunk);
                match result {
                    Ok(()) => {
                        if st.cp.namespace.chunk_owner(chunk).is_some() {
                            let servers = st.locs.entry(chunk).or_default();
                            if !servers.contains(&target) {
                                servers.push(target.clone());
                            }
                            st.repairs_done += 1;
                            info!(chunk, %target, "chunk re-replicated");
                        }
                    }
                    Err(e) => warn!(chunk, %target, error = %e, "chunk repair failed"),
                }
            });
        }
    }
}

async fn repair(shared: &Shared, chunk: u64, target: &str, job: Repair) -> Result<(), String> {
    let (server, method, payload) = match job {
        Repair::Copy { source, length } => {
            let req = ReplicateRequest {
                chunk_id: chunk,
                length,
                target: target.to_string(),
            };
            (source, method::CHUNK_REPLICATE, req.encode_to_vec())
        }
        Repair::Rebuild(req) => (
            target.to_string(),
            method::CHUNK_RECONSTRUCT,
            req.encode_to_vec(),
        ),
    };
    let client = shared.peers.chunk_server(&server).await?;
    let reply = match client
        .call(method, payload.into(), shared.options.call_timeout)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            shared.peers.forget(&server).await;
            return Err(e.to_string());
        }
    };
    let reply =
        WriteReply::decode(reply).map_err(|e| format!("undecodable {method} reply: {e}"))?;
    match reply.error {
        Some(e) => Err(e.message),
        None => Ok(()),
    }
}

/// How a chunk is repaired.
pub(super) enum Repair {
    /// Copied from a replica.
    Copy { source: String, length: u64 },
    /// Rebuilt from the other chunks of its striped block.
    Rebuild(ReconstructRequest),
}

/// Marks silent servers dead and picks repairs: (chunk, target, how).
pub(super) fn tick(shared: &Shared) -> Vec<(u64, String, Repair)> {
    let mut st = shared.state.lock();
    let now = shared.options.clock.now();
    let dead: Vec<String> = st
        .servers
        .iter()
        .filter(|(_, s)| !shared.is_live(s, now))
        .map(|(a, _)| a.clone())
        .collect();
    for d in &dead {
        warn!(server = %d, "chunk server is dead; its replicas will be re-created");
        st.servers.remove(d);
        for servers in st.locs.values_mut() {
            servers.retain(|s| s != d);
        }
    }
    if now.duration_since(shared.started) < Duration::from_millis(shared.options.startup_grace_ms) {
        return Vec::new();
    }
    let mut jobs = Vec::new();
    let max = shared.options.max_concurrent_repairs;
    let mut load: HashMap<String, u64> = st
        .servers
        .iter()
        .map(|(a, s)| (a.clone(), s.chunks))
        .collect();
    let mut picked = Vec::new();
    for (_, f) in st.cp.namespace.files() {
        for b in f.blocks.iter().filter(|b| b.complete && b.len > 0) {
            for (k, c) in b.chunks.iter().enumerate() {
                if st.repairs.len() + picked.len() >= max {
                    break;
                }
                let servers = st.locs.get(c).map(Vec::as_slice).unwrap_or(&[]);
                let striped = matches!(b.layout, Layout::Striped { .. });
                if (servers.is_empty() && !striped)
                    || servers.len() >= b.layout.replicas()
                    || st.repairs.contains(c)
                {
                    continue;
                }
                // Striped chunks have one server each: a striped block's siblings must stay
                // on other servers.
                let target = load
                    .iter()
                    .filter(|(a, _)| {
                        !servers.contains(a)
                            && !st.servers[a.as_str()].pending_delete.contains(c)
                            && !b
                                .chunks
                                .iter()
                                .any(|s| st.locs.get(s).is_some_and(|v| v.contains(a)))
                    })
                    .min_by_key(|(_, n)| **n)
                    .map(|(a, _)| a.clone());
                let Some(target) = target else { continue };
                *load.entry(target.clone()).or_default() += 1;
                let job = if servers.is_empty() {
                    // A lost chunk of a striped block: rebuilt on the target from its siblings.
                    Repair::Rebuild(ReconstructRequest {
                        index: k as u32,
                        block_length: b.len,
                        layout: Some(b.layout.to_wire(true)),
                        chunks: b
                            .chunks
                            .iter()
                            .map(|x| WireChunk {
                                chunk_id: *x,
                                servers: st.locs.get(x).cloned().unwrap_or_default(),
                            })
                            .collect(),
                    })
                } else {
                    Repair::Copy {
                        source: servers[0].clone(),
                        length: rs::chunk_len(b.layout, b.len, k),
                    }
                };
                picked.push((*c, target, job));
            }
        }
    }
    for (c, ..) in &picked {
        st.repairs.insert(*c);
    }
    jobs.extend(picked);
    jobs
}
