//! Emitters: filter IR -> classic BPF and eBPF.
//!
//! STUB (being written).
