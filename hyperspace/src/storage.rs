//! The durable Raft storage (being written).
