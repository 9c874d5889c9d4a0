//! The range servers as the master knows them: registration, connections, liveness by their
//! Hyperspace locks (a dead one starts its recovery).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::ErrorKind;
use hyperspace::command::{LockMode, flags};
use proto::layout::*;
use proto::rs::client::{RangeServerClient, RangeServerClientOptions, RsError};

use crate::control::Master;
use crate::{HeldRange, Result, hs_err, unavailable};

/// A range server as the master knows it.
pub(crate) struct ServerEntry {
    pub(crate) addr: SocketAddr,
    /// Our handle on its lock file: when we can lock it, the server is gone.
    pub(crate) handle: u64,
    pub(crate) live: bool,
    /// Ranges (table id, start, end) it reported at the last look.
    pub(crate) ranges: Vec<HeldRange>,
}

impl Master {
    pub(crate) async fn client(&mut self, location: &str) -> Result<Arc<RangeServerClient>> {
        if let Some(c) = self.clients.get(location) {
            return Ok(c.clone());
        }
        let addr = match self.servers.get(location) {
            Some(s) if s.live => s.addr,
            _ => return Err(unavailable(format!("range server {location} is not live"))),
        };
        let options = RangeServerClientOptions {
            connect_timeout: Duration::from_secs(2),
            call_timeout: Duration::from_secs(20),
            ..Default::default()
        };
        let c = RangeServerClient::connect_with(addr, &self.credentials, options)
            .await
            .map_err(|e| unavailable(format!("range server {location} at {addr}: {e}")))?;
        let c = Arc::new(c);
        self.clients.insert(location.to_string(), c.clone());
        Ok(c)
    }

    /// Runs a call on a range server, forgetting its connection if the call did not get
    /// through.
    pub(crate) async fn on_server<T, F, Fut>(
        &mut self,
        location: &str,
        f: F,
    ) -> Result<std::result::Result<T, RsError>>
    where
        F: FnOnce(Arc<RangeServerClient>) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, RsError>>,
    {
        let c = self.client(location).await?;
        let r = f(c).await;
        if let Err(e) = &r
            && e.kind() == ErrorKind::Unavailable
        {
            self.clients.remove(location);
        }
        Ok(r)
    }

    pub(crate) fn live(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|(_, s)| s.live)
            .map(|(l, _)| l.clone())
            .collect()
    }

    /// The live server with the fewest ranges (not `except`).
    pub(crate) fn least_loaded(&self, except: Option<&str>) -> Option<String> {
        self.servers
            .iter()
            .filter(|(l, s)| s.live && Some(l.as_str()) != except)
            .min_by_key(|(l, s)| (s.ranges.len(), (*l).clone()))
            .map(|(l, _)| l.clone())
    }

    /// Where the `n` ranges of a new pre-split table go: each to the live server holding the
    /// fewest ranges counting those already placed (ties by name), so the table is spread
    /// evenly and the least loaded servers fill first. Empty without a live server.
    pub(crate) fn spread(&self, n: usize) -> Vec<String> {
        let mut load: Vec<(usize, String)> = self
            .servers
            .iter()
            .filter(|(_, s)| s.live)
            .map(|(l, s)| (s.ranges.len(), l.clone()))
            .collect();
        if load.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let i = (0..load.len())
                .min_by(|&a, &b| load[a].cmp(&load[b]))
                .expect("not empty");
            out.push(load[i].1.clone());
            load[i].0 += 1;
        }
        out
    }

    /// Learns new servers and notices dead ones (their lock files become lockable), starting
    /// their recovery.
    pub(crate) async fn refresh_servers(&mut self) -> Result<()> {
        let entries = self.hs.readdir(SERVERS).await.map_err(hs_err)?;
        for e in &entries {
            if self.servers.contains_key(&e.name) {
                continue;
            }
            let node = server_node(&e.name);
            // The address is set after the server took its lock: no address, not ready.
            let Some(addr) = self.attr(&node, ADDR_ATTR).await? else {
                continue;
            };
            let Ok(addr) = addr.parse::<SocketAddr>() else {
                tracing::warn!(server = e.name, addr, "range server with a bad address");
                continue;
            };
            let handle = self
                .hs
                .open(&node, flags::READ | flags::LOCK, 0)
                .await
                .map_err(hs_err)?;
            tracing::info!(server = e.name, %addr, "range server registered");
            self.servers.insert(
                e.name.clone(),
                ServerEntry {
                    addr,
                    handle,
                    live: true,
                    ranges: Vec::new(),
                },
            );
        }
        let names: Vec<String> = self.live();
        for name in names {
            let handle = self.servers[&name].handle;
            if self
                .hs
                .try_lock(handle, LockMode::Exclusive)
                .await
                .map_err(hs_err)?
                .is_some()
            {
                tracing::warn!(
                    server = name,
                    "range server lost its lock: recovering its ranges"
                );
                if let Some(s) = self.servers.get_mut(&name) {
                    s.live = false;
                }
                self.clients.remove(&name);
                self.load.forget(&name);
                self.start_recovery(&name).await?;
            }
        }
        Ok(())
    }
}
