//! The shared, bounded cache of decompressed cell-store blocks.
