//! Classic BPF encodings (being written).
