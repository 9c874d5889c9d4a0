//! The UDP sockets under QUIC endpoints, with kernel buffers sized for bulk transfers.
//!
//! A chunk server in a write pipeline takes bursts of datagrams from several senders at once.
//! With Linux's default receive buffer (208 KiB) the kernel drops some of them
//! (`RcvbufErrors` in `/proc/net/snmp`: about 4% of datagrams in `ht bench dfs`), and QUIC
//! takes each drop as congestion: it retransmits and slows the sender down. A socket asks for
//! `socket_buffer_bytes` (4 MiB by default) for both directions; the kernel caps the request
//! at `net.core.rmem_max` / `wmem_max` unless the process may force it (`CAP_NET_ADMIN`).
//! When a socket gets less than asked, the process warns once, naming the setting.

use std::net::SocketAddr;
use std::sync::Once;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Default kernel buffer per endpoint socket, each direction.
pub const DEFAULT_SOCKET_BUFFER_BYTES: usize = 4 << 20;

/// A UDP socket bound to `addr` with (up to) `buffer_bytes` of kernel buffer each way; 0
/// keeps the system's default. An IPv6 socket also takes IPv4 where the system allows it.
pub(crate) fn udp_socket(
    addr: SocketAddr,
    buffer_bytes: usize,
) -> std::io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        // Dual-stack where allowed; a v6-only system still works for v6 peers.
        let _ = socket.set_only_v6(false);
    }
    if buffer_bytes > 0 {
        size_buffers(&socket, buffer_bytes);
    }
    socket.bind(&SockAddr::from(addr))?;
    Ok(socket.into())
}

/// A QUIC endpoint on a [`udp_socket`]: a server when `server` is given, else a client.
pub(crate) fn endpoint(
    addr: SocketAddr,
    server: Option<quinn::ServerConfig>,
    buffer_bytes: usize,
) -> std::io::Result<quinn::Endpoint> {
    let runtime = quinn::default_runtime()
        .ok_or_else(|| std::io::Error::other("a QUIC endpoint needs a tokio runtime"))?;
    let socket = udp_socket(addr, buffer_bytes)?;
    quinn::Endpoint::new(quinn::EndpointConfig::default(), server, socket, runtime)
}

/// Asks for `bytes` of receive and send buffer: as much as the kernel allows, forced past
/// its limit where the process may (Linux, `CAP_NET_ADMIN`).
fn size_buffers(socket: &Socket, bytes: usize) {
    let _ = socket.set_recv_buffer_size(bytes);
    let _ = socket.set_send_buffer_size(bytes);
    // Linux reports twice what was set (its bookkeeping overhead).
    let short = |got: std::io::Result<usize>| !got.is_ok_and(|g| g >= bytes);
    #[cfg(target_os = "linux")]
    {
        if short(socket.recv_buffer_size()) {
            force(socket, libc::SO_RCVBUFFORCE, bytes);
        }
        if short(socket.send_buffer_size()) {
            force(socket, libc::SO_SNDBUFFORCE, bytes);
        }
    }
    let (recv, send) = (socket.recv_buffer_size(), socket.send_buffer_size());
    if !recv.as_ref().is_ok_and(|&g| g >= bytes) || !send.as_ref().is_ok_and(|&g| g >= bytes) {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                asked = bytes,
                recv = ?recv.ok(),
                send = ?send.ok(),
                "rpc: the kernel gave QUIC sockets smaller buffers than asked; under load \
                 datagrams may be dropped and transfers slow down (raise net.core.rmem_max \
                 and net.core.wmem_max to at least the asked size)"
            );
        });
    }
}

#[cfg(target_os = "linux")]
fn force(socket: &Socket, option: libc::c_int, bytes: usize) {
    use std::os::fd::AsRawFd as _;
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: a valid socket descriptor and a pointer to a c_int that outlives the call, with
    // its size; the kernel only reads it. A refusal (no CAP_NET_ADMIN) leaves the socket as is.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_get_the_buffers_asked_for_or_the_most_the_kernel_allows() {
        let s = udp_socket("127.0.0.1:0".parse().unwrap(), 1 << 20).expect("bind");
        let s = Socket::from(s);
        let default = udp_socket("127.0.0.1:0".parse().unwrap(), 0).expect("bind");
        let default = Socket::from(default).recv_buffer_size().unwrap();
        let got = s.recv_buffer_size().unwrap();
        // At least what was asked, unless the kernel caps it below; never below its default.
        assert!(got >= default, "{got} < default {default}");
        let cap = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok());
        if cap.is_some_and(|c| c >= 1 << 20) {
            assert!(got >= 1 << 20, "asked 1 MiB, got {got}");
        }
        assert!(s.local_addr().unwrap().as_socket().unwrap().port() != 0);
    }
}
