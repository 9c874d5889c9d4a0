//! Wire framing: length-prefixed prost envelopes, on one QUIC bidirectional stream per call or,
//! over TCP (`tcp.rs`), one call after another on a connection.
//!
//! A frame is a little-endian `u32` byte length followed by that many bytes of a prost message.
//! The client writes one [`RequestEnvelope`] and finishes its side; the server answers with one
//! [`ResponseEnvelope`] (a unary call) or a sequence of them (a server-push stream), then
//! finishes. A response carrying an error ends the call. Byte layout: `docs/formats/rpc.md`.

use bytes::{Bytes, BytesMut};
use common::ErrorKind;
use prost::Message;

/// Default bound on one frame (request or response message), in bytes.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Bytes in a frame's length prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// A call: which method, its prost-encoded argument, and whether the caller expects a stream.
#[derive(Clone, PartialEq, Message)]
pub struct RequestEnvelope {
    #[prost(string, tag = "1")]
    pub method: String,
    #[prost(bytes = "bytes", tag = "2")]
    pub payload: Bytes,
    #[prost(bool, tag = "3")]
    pub stream: bool,
}

/// One answer: a payload, or an error that ends the call.
#[derive(Clone, PartialEq, Message)]
pub struct ResponseEnvelope {
    #[prost(bytes = "bytes", tag = "1")]
    pub payload: Bytes,
    #[prost(message, optional, tag = "2")]
    pub error: Option<WireError>,
}

/// An error as it travels: a coarse kind (see [`kind_to_wire`]) and a message for people.
#[derive(Clone, PartialEq, Message)]
pub struct WireError {
    #[prost(int32, tag = "1")]
    pub kind: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

impl ResponseEnvelope {
    pub fn ok(payload: Bytes) -> Self {
        Self {
            payload,
            error: None,
        }
    }

    pub fn err(kind: ErrorKind, message: String) -> Self {
        Self {
            payload: Bytes::new(),
            error: Some(WireError {
                kind: kind_to_wire(kind),
                message,
            }),
        }
    }
}

/// Wire codes of [`ErrorKind`]; these numbers are part of the format and never change.
pub fn kind_to_wire(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::NotFound => 1,
        ErrorKind::AlreadyExists => 2,
        ErrorKind::InvalidInput => 3,
        ErrorKind::Corruption => 4,
        ErrorKind::Unavailable => 5,
        ErrorKind::Internal => 6,
    }
}

/// Inverse of [`kind_to_wire`]; unknown codes (from a newer peer) read as `Internal`.
pub fn kind_from_wire(code: i32) -> ErrorKind {
    match code {
        1 => ErrorKind::NotFound,
        2 => ErrorKind::AlreadyExists,
        3 => ErrorKind::InvalidInput,
        4 => ErrorKind::Corruption,
        5 => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
}

/// What went wrong moving one frame; the caller adds peer and method.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("message of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: usize, limit: usize },
    #[error("stream ended inside a frame ({got} of {want} bytes)")]
    Truncated { got: usize, want: usize },
    #[error("cannot decode message: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("read: {0}")]
    Read(#[from] quinn::ReadError),
    #[error("write: {0}")]
    Write(#[from] quinn::WriteError),
    #[error("stream closed: {0}")]
    Closed(#[from] quinn::ClosedStream),
    /// A TCP connection failed (`tcp.rs`).
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
}

/// Encodes `msg` as one frame, refusing it if it exceeds `limit` bytes.
pub fn encode<M: Message>(msg: &M, limit: usize) -> Result<Bytes, FrameError> {
    let len = msg.encoded_len();
    if len > limit || u32::try_from(len).is_err() {
        return Err(FrameError::TooLarge { len, limit });
    }
    let mut buf = BytesMut::with_capacity(LENGTH_PREFIX_BYTES + len);
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    msg.encode(&mut buf)
        .map_err(|_| FrameError::TooLarge { len, limit })?;
    Ok(buf.freeze())
}

/// Writes `msg` as one frame.
pub async fn write_frame<M: Message>(
    send: &mut quinn::SendStream,
    msg: &M,
    limit: usize,
) -> Result<(), FrameError> {
    let frame = encode(msg, limit)?;
    send.write_all(&frame).await?;
    Ok(())
}

/// Decodes the frame at the start of `buf` as [`read_frame`] reads one from a stream, and returns
/// it with the bytes it took; `Ok(None)` if `buf` is empty.
pub fn decode_frame<M: Message + Default>(
    buf: &[u8],
    limit: usize,
) -> Result<Option<(M, usize)>, FrameError> {
    if buf.is_empty() {
        return Ok(None);
    }
    let Some(prefix) = buf.first_chunk::<LENGTH_PREFIX_BYTES>() else {
        return Err(FrameError::Truncated {
            got: buf.len(),
            want: LENGTH_PREFIX_BYTES,
        });
    };
    let len = u32::from_le_bytes(*prefix) as usize;
    if len > limit {
        return Err(FrameError::TooLarge { len, limit });
    }
    let body = &buf[LENGTH_PREFIX_BYTES..];
    if body.len() < len {
        return Err(FrameError::Truncated {
            got: body.len(),
            want: len,
        });
    }
    Ok(Some((M::decode(&body[..len])?, LENGTH_PREFIX_BYTES + len)))
}

/// Reads one frame; `Ok(None)` if the stream ended cleanly before a new frame began.
pub async fn read_frame<M: Message + Default>(
    recv: &mut quinn::RecvStream,
    limit: usize,
) -> Result<Option<M>, FrameError> {
    let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
    match recv.read_exact(&mut prefix).await {
        Ok(()) => {}
        Err(quinn::ReadExactError::FinishedEarly(0)) => return Ok(None),
        Err(quinn::ReadExactError::FinishedEarly(got)) => {
            return Err(FrameError::Truncated {
                got,
                want: LENGTH_PREFIX_BYTES,
            });
        }
        Err(quinn::ReadExactError::ReadError(e)) => return Err(e.into()),
    }
    let len = u32::from_le_bytes(prefix) as usize;
    if len > limit {
        return Err(FrameError::TooLarge { len, limit });
    }
    // Bounded by `limit` above, so this allocation is too.
    let mut body = BytesMut::zeroed(len);
    match recv.read_exact(&mut body).await {
        Ok(()) => {}
        Err(quinn::ReadExactError::FinishedEarly(got)) => {
            return Err(FrameError::Truncated { got, want: len });
        }
        Err(quinn::ReadExactError::ReadError(e)) => return Err(e.into()),
    }
    Ok(Some(M::decode(body.freeze())?))
}

/// Reads one frame from a byte stream (a TCP connection); `Ok(None)` if the stream ended
/// cleanly before a new frame began.
pub async fn read_frame_from<M, R>(read: &mut R, limit: usize) -> Result<Option<M>, FrameError>
where
    M: Message + Default,
    R: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
    let mut got = 0;
    while got < LENGTH_PREFIX_BYTES {
        match read.read(&mut prefix[got..]).await? {
            0 if got == 0 => return Ok(None),
            0 => {
                return Err(FrameError::Truncated {
                    got,
                    want: LENGTH_PREFIX_BYTES,
                });
            }
            n => got += n,
        }
    }
    let len = u32::from_le_bytes(prefix) as usize;
    if len > limit {
        return Err(FrameError::TooLarge { len, limit });
    }
    // Bounded by `limit` above, so this allocation is too.
    let mut body = BytesMut::zeroed(len);
    let mut got = 0;
    while got < len {
        match read.read(&mut body[got..]).await? {
            0 => return Err(FrameError::Truncated { got, want: len }),
            n => got += n,
        }
    }
    Ok(Some(M::decode(body.freeze())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::AlreadyExists,
            ErrorKind::InvalidInput,
            ErrorKind::Corruption,
            ErrorKind::Unavailable,
            ErrorKind::Internal,
        ] {
            assert_eq!(kind_from_wire(kind_to_wire(kind)), kind);
        }
        assert_eq!(kind_from_wire(99), ErrorKind::Internal);
    }

    #[test]
    fn encode_prefixes_length_and_bounds_size() -> Result<(), FrameError> {
        let req = RequestEnvelope {
            method: "echo".into(),
            payload: Bytes::from_static(b"hi"),
            stream: false,
        };
        let frame = encode(&req, 1024)?;
        let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(len, frame.len() - LENGTH_PREFIX_BYTES);
        assert_eq!(RequestEnvelope::decode(&frame[LENGTH_PREFIX_BYTES..])?, req);
        assert!(matches!(
            encode(&req, 3),
            Err(FrameError::TooLarge { limit: 3, .. })
        ));
        Ok(())
    }

    #[test]
    fn decode_frame_reads_one_frame_and_refuses_short_or_large_ones() -> Result<(), FrameError> {
        let req = RequestEnvelope {
            method: "echo".into(),
            payload: Bytes::from_static(b"hi"),
            stream: true,
        };
        let frame = encode(&req, 1024)?;
        let mut two = frame.to_vec();
        two.extend_from_slice(&frame);
        assert_eq!(
            decode_frame::<RequestEnvelope>(&two, 1024)?,
            Some((req, frame.len()))
        );
        assert_eq!(decode_frame::<RequestEnvelope>(&[], 1024)?, None);
        assert!(matches!(
            decode_frame::<RequestEnvelope>(&frame[..2], 1024),
            Err(FrameError::Truncated { got: 2, want: 4 })
        ));
        assert!(matches!(
            decode_frame::<RequestEnvelope>(&frame[..frame.len() - 1], 1024),
            Err(FrameError::Truncated { .. })
        ));
        assert!(matches!(
            decode_frame::<RequestEnvelope>(&frame, 3),
            Err(FrameError::TooLarge { limit: 3, .. })
        ));
        Ok(())
    }

    #[tokio::test]
    async fn read_frame_from_reads_frames_and_refuses_damaged_ones() -> Result<(), FrameError> {
        let req = RequestEnvelope {
            method: "chunk.write".into(),
            payload: Bytes::from(vec![9u8; 3000]),
            stream: false,
        };
        let frame = encode(&req, 1 << 20)?;
        let mut two = frame.to_vec();
        two.extend_from_slice(&frame);
        let mut r = &two[..];
        assert_eq!(
            read_frame_from::<RequestEnvelope, _>(&mut r, 1 << 20).await?,
            Some(req.clone())
        );
        assert_eq!(
            read_frame_from::<RequestEnvelope, _>(&mut r, 1 << 20).await?,
            Some(req)
        );
        assert_eq!(
            read_frame_from::<RequestEnvelope, _>(&mut r, 1 << 20).await?,
            None
        );
        // Cut inside the prefix, inside the body; over the limit; a body that is not a message.
        let mut cut = &frame[..2];
        assert!(matches!(
            read_frame_from::<RequestEnvelope, _>(&mut cut, 1 << 20).await,
            Err(FrameError::Truncated { got: 2, want: 4 })
        ));
        let mut cut = &frame[..frame.len() - 1];
        assert!(matches!(
            read_frame_from::<RequestEnvelope, _>(&mut cut, 1 << 20).await,
            Err(FrameError::Truncated { .. })
        ));
        let mut big = &frame[..];
        assert!(matches!(
            read_frame_from::<RequestEnvelope, _>(&mut big, 100).await,
            Err(FrameError::TooLarge { limit: 100, .. })
        ));
        let garbage = [4u8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        let mut g = &garbage[..];
        assert!(matches!(
            read_frame_from::<RequestEnvelope, _>(&mut g, 1 << 20).await,
            Err(FrameError::Decode(_))
        ));
        Ok(())
    }
}
