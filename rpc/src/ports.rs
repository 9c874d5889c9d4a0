//! Free loopback addresses for servers that tests and local clusters start as processes.
//!
//! Such a server gets its address before it starts (peers and clients must know it), so the
//! caller binds a port, releases it and passes it on. A port taken from the kernel's ephemeral
//! range (`bind(…:0)`) can be handed in that gap to any socket bound to port 0, and every QUIC
//! client endpoint is one: with many tests running at once a server then failed to start
//! because a client held its port. Ports here come from below the ephemeral range
//! (`/proc/sys/net/ipv4/ip_local_port_range`), which only explicit binds use, at a random
//! offset per process and in sequence within it.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Mutex;

/// The lowest port handed out.
const LOWEST_PORT: u16 = 10_000;

/// Where this process goes on from: the next candidate port, set at random on first use.
static NEXT: Mutex<Option<u32>> = Mutex::new(None);

/// The first port of the kernel's ephemeral range (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A loopback address whose UDP port was free a moment ago, outside the ephemeral range where
/// there is room for one (else from the kernel, as `127.0.0.1:0` would give).
pub fn free_loopback_addr() -> std::io::Result<SocketAddr> {
    let end = u32::from(ephemeral_start());
    let start = u32::from(LOWEST_PORT);
    if end < start + 1_000 {
        return UdpSocket::bind("127.0.0.1:0")?.local_addr();
    }
    let span = end - start;
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    let mut candidate = next.unwrap_or_else(|| rand::random_range(0..span));
    for _ in 0..256 {
        let port = (start + candidate % span) as u16;
        candidate = (candidate + 1) % span;
        if let Ok(socket) = UdpSocket::bind(("127.0.0.1", port)) {
            *next = Some(candidate);
            return socket.local_addr();
        }
    }
    *next = Some(candidate);
    UdpSocket::bind("127.0.0.1:0")?.local_addr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_addresses_are_distinct_below_the_ephemeral_range() {
        let end = ephemeral_start();
        let addrs: Vec<SocketAddr> = (0..50).map(|_| free_loopback_addr().unwrap()).collect();
        let mut ports: Vec<u16> = addrs.iter().map(|a| a.port()).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 50, "a port was handed out twice: {addrs:?}");
        if end >= LOWEST_PORT + 1_000 {
            assert!(
                ports.iter().all(|p| (LOWEST_PORT..end).contains(p)),
                "{ports:?} not in {LOWEST_PORT}..{end}"
            );
        }
        assert!(addrs.iter().all(|a| a.ip().is_loopback()));
    }
}
