//! Writer leases: files whose writer went silent past `lease_timeout_ms`, and their recovery
//! (the last block cut to its committed length, the file closed).

use std::time::Duration;

use tracing::warn;

use super::Shared;
use super::namespace::Op;
use crate::messages::*;
use crate::rs;

/// Open files whose writer has been silent past the lease timeout (marked as recovering).
pub(super) fn expired_leases(shared: &Shared) -> Vec<u64> {
    let mut st = shared.state.lock();
    let timeout = Duration::from_millis(shared.options.lease_timeout_ms);
    let now = shared.options.clock.now();
    let expired: Vec<u64> = st
        .leases
        .iter()
        .filter(|(id, at)| {
            now.saturating_duration_since(**at) > timeout && !st.recovering.contains(id)
        })
        .map(|(id, _)| *id)
        .collect();
    for id in &expired {
        st.recovering.insert(*id);
    }
    expired
}

/// Lease recovery: the chunks of the file's last block are cut to the length the writer last
/// committed on every server that answers, then the file is closed at that length.
pub(super) async fn recover_lease(shared: &Shared, file_id: u64) {
    let last = {
        let st = shared.state.lock();
        st.cp.namespace.file_by_id(file_id).and_then(|(path, f)| {
            let b = f.blocks.last()?;
            Some((
                path.to_string(),
                b.clone(),
                b.chunks
                    .iter()
                    .map(|c| st.locs.get(c).cloned().unwrap_or_default())
                    .collect::<Vec<_>>(),
            ))
        })
    };
    if let Some((path, block, servers)) = &last {
        warn!(%path, file_id, "writer lease expired; closing the file at its committed length");
        for (k, (chunk, holders)) in block.chunks.iter().zip(servers).enumerate() {
            let req = FinalizeRequest {
                chunk_id: *chunk,
                length: rs::chunk_len(block.layout, block.len, k),
            };
            let mut kept = Vec::new();
            for server in holders {
                let ok = match shared.peers.chunk_server(server).await {
                    Ok(c) => matches!(
                        c.call_message::<_, WriteReply>(
                            method::CHUNK_FINALIZE,
                            &req,
                            shared.options.call_timeout
                        )
                        .await,
                        Ok(WriteReply { error: None, .. })
                    ),
                    Err(_) => false,
                };
                if ok {
                    kept.push(server.clone());
                }
            }
            let mut st = shared.state.lock();
            if st.cp.namespace.chunk_owner(*chunk).is_some() {
                st.locs.insert(*chunk, kept);
            }
        }
    }
    let mut st = shared.state.lock();
    st.recovering.remove(&file_id);
    let timeout = Duration::from_millis(shared.options.lease_timeout_ms);
    // The writer may have come back meanwhile.
    if st
        .leases
        .get(&file_id)
        .is_some_and(|at| shared.options.clock.now().saturating_duration_since(*at) <= timeout)
    {
        return;
    }
    st.leases.remove(&file_id);
    let still_open = st
        .cp
        .namespace
        .file_by_id(file_id)
        .is_some_and(|(_, f)| f.open);
    if still_open
        && let Err(e) = shared.mutate(
            &mut st,
            &Op::Close { file_id },
            shared.options.sync_namespace,
        )
    {
        warn!(file_id, error = %e, "lease recovery: cannot close the file");
    }
}
