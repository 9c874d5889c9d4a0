//! The commit log: numbered fragments of checksummed, compressed blocks (docs/formats/commitlog.md).
