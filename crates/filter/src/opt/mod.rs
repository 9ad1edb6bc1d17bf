//! The optimizer: rewrites a filter into a faster one with the same meaning on every packet.
//!
//! STUB (being written).
