//! Conformance corpus support (being written).
