//! ht's network layer: QUIC endpoints with cluster mutual TLS, framed prost messages, calls with
//! deadlines, server-push streams and retries; unary calls also over TCP + TLS for bulk data.
//!
//! Every other crate talks to other processes through this one; only this crate knows how
//! messages are framed on the wire.

pub mod client;
pub mod error;
pub mod frame;
mod ports;
pub mod retry;
pub mod server;
mod socket;
pub mod tcp;
pub mod tls;

/// The payload type of calls and streams, for services written outside this crate.
pub use bytes::Bytes;
pub use client::{Client, ClientOptions, ResponseStream, bind_addr, local_ip, set_local_ip};
pub use error::RpcError;
pub use ports::free_loopback_addr;
pub use retry::{Backoff, RetryPolicy, retry, retry_seeded};
pub use server::{PeerInfo, STALLED_READER, Server, ServerOptions, Service, StreamSink};
pub use socket::DEFAULT_SOCKET_BUFFER_BYTES;
pub use tcp::{TcpClient, TcpClientOptions};
pub use tls::{ClusterCredentials, TlsError};
