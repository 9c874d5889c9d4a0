//! The Hyperspace state machine (being written).
